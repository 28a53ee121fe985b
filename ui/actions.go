package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxForm bounds an action's form, and maxIDs the jobs one action names.
const (
	maxForm = 64 << 10
	maxIDs  = 1000
)

// crossOrigin refuses the cross-origin requests browsers mark as such.
var crossOrigin = http.NewCrossOriginProtection()

// action serves /actions/{action}: POST only, with AllowActions only, after
// the cross-origin and token checks.
func (h *Handler) action(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("action")
	do := map[string]func(*http.Request) (string, []any, error){
		"retry": h.retry, "cancel": h.cancel, "pause": h.pause, "resume": h.resume, "cancel-batch": h.cancelBatch,
	}[name]
	switch {
	case !h.cfg.AllowActions || do == nil:
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no page at %s (actions are enabled with --allow-actions or Config.AllowActions)", h.cfg.Path+r.URL.Path))
		return
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, r, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: actions take a POST", r.Method, h.cfg.Path+r.URL.Path))
		return
	}
	if err := crossOrigin.Check(r); err != nil {
		h.refuse(w, r, name, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, badInput("the form: %v", err))
		return
	}
	if !checkCSRF(r) {
		h.refuse(w, r, name, errCSRF)
		return
	}
	start := time.Now()
	msg, attrs, err := do(r)
	attrs = append(attrs, "action", name, "actor", h.actor(r), "duration", time.Since(start))
	if err != nil {
		h.log.InfoContext(r.Context(), "ui: action failed", append(attrs, "result", "error", "err", err)...)
		h.failErr(w, r, err)
		return
	}
	h.log.InfoContext(r.Context(), "ui: action", append(attrs, "result", msg)...)
	h.setFlash(w, r, msg)
	http.Redirect(w, r, h.returnTo(r.PostFormValue("return")), http.StatusSeeOther)
}

// refuse answers 403 to an action refused as a cross-site request.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, name string, err error) {
	h.log.WarnContext(r.Context(), "ui: action refused", "action", name, "actor", h.actor(r), "err", err)
	h.fail(w, r, http.StatusForbidden, fmt.Errorf("%s: %w", name, err))
}

// actor names who made r.
func (h *Handler) actor(r *http.Request) string {
	if h.cfg.Actor != nil {
		if a := h.cfg.Actor(r); a != "" {
			return a
		}
	}
	return r.RemoteAddr
}

// returnTo returns where an action goes back to: ret if it is a path of
// the UI (under Config.Path, no scheme, no host), else the overview.
func (h *Handler) returnTo(ret string) string {
	home := h.cfg.Path + "/"
	u, err := url.Parse(ret)
	switch {
	case ret == "" || err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "",
		!strings.HasPrefix(ret, "/"), strings.HasPrefix(ret, "//"), strings.ContainsAny(ret, "\\\r\n\t"),
		!strings.HasPrefix(u.Path, home) && u.Path != h.cfg.Path,
		strings.Contains(u.Path, "/../") || strings.HasSuffix(u.Path, "/.."):
		return home
	}
	return ret
}

// ids parses the form's id fields.
func ids(r *http.Request) ([]int64, error) {
	vs := r.PostForm["id"]
	if len(vs) == 0 {
		return nil, badInput("no job id given (field id)")
	}
	if len(vs) > maxIDs {
		return nil, badInput("%d job ids given; at most %d", len(vs), maxIDs)
	}
	out := make([]int64, 0, len(vs))
	for _, v := range vs {
		id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || id <= 0 {
			return nil, badInput("job id %q is not a positive integer", v)
		}
		out = append(out, id)
	}
	return out, nil
}

func (h *Handler) retry(r *http.Request) (string, []any, error) {
	ids, err := ids(r)
	if err != nil {
		return "", nil, err
	}
	changed, err := h.q.Retry(r.Context(), ids...)
	attrs := []any{"ids", ids, "changed", changed}
	if err != nil {
		return "", attrs, err
	}
	return outcome("retried", changed, ids, "not discarded or cancelled"), attrs, nil
}

func (h *Handler) cancel(r *http.Request) (string, []any, error) {
	ids, err := ids(r)
	if err != nil {
		return "", nil, err
	}
	changed, err := h.q.Cancel(r.Context(), ids...)
	attrs := []any{"ids", ids, "changed", changed}
	if err != nil {
		return "", attrs, err
	}
	return outcome("cancelled", changed, ids, "not pending"), attrs, nil
}

// outcome says which of ids an action changed.
func outcome(verb string, changed, ids []int64, why string) string {
	if len(ids) == 1 {
		if len(changed) == 1 {
			return fmt.Sprintf("%s job %d", verb, ids[0])
		}
		return fmt.Sprintf("job %d was not %s: %s", ids[0], verb, why)
	}
	return fmt.Sprintf("%s %d of %d jobs (the others: %s)", verb, len(changed), len(ids), why)
}

// groupKind reads the form's group and kind.
func groupKind(r *http.Request) (group, kind string, err error) {
	group, kind = strings.TrimSpace(r.PostFormValue("group")), strings.TrimSpace(r.PostFormValue("kind"))
	if group == "" {
		return "", "", badInput("no group given (field group)")
	}
	return group, kind, nil
}

// what names a pause's subject.
func what(group, kind string) string {
	if kind == "" {
		return fmt.Sprintf("group %s", group)
	}
	return fmt.Sprintf("kind %s of group %s", kind, group)
}

func (h *Handler) pause(r *http.Request) (string, []any, error) {
	group, kind, err := groupKind(r)
	if err != nil {
		return "", nil, err
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	attrs := []any{"group", group, "kind", kind, "reason", reason}
	if err := h.q.Pause(r.Context(), group, kind, reason); err != nil {
		return "", attrs, err
	}
	return "paused " + what(group, kind), attrs, nil
}

func (h *Handler) resume(r *http.Request) (string, []any, error) {
	group, kind, err := groupKind(r)
	if err != nil {
		return "", nil, err
	}
	attrs := []any{"group", group, "kind", kind}
	if err := h.q.Resume(r.Context(), group, kind); err != nil {
		return "", attrs, err
	}
	return "resumed " + what(group, kind), attrs, nil
}

func (h *Handler) cancelBatch(r *http.Request) (string, []any, error) {
	group, name := strings.TrimSpace(r.PostFormValue("group")), r.PostFormValue("name")
	if group == "" || name == "" {
		return "", nil, badInput("a batch is named by fields group and name")
	}
	attrs := []any{"group", group, "name", name}
	n, err := h.q.CancelBatch(r.Context(), group, name)
	attrs = append(attrs, "cancelled", n)
	if err != nil {
		return "", attrs, err
	}
	return fmt.Sprintf("cancelled batch %s of group %s (%d pending items cancelled)", name, group, n), attrs, nil
}
