package main

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"slices"
	"strconv"
)

// uiPage is one page the suite measures: a URL of the UI contract (see
// docs/ui.md), relative to the handler's root.
type uiPage struct {
	name   string
	path   string
	marker string // the id the page must hold (its main element)
	what   string // what it shows, for the report
}

// Each page kind's main element, by the UI contract.
const (
	markOverview = "groups"
	markMap      = "partitions"
	markJobs     = "jobs"
	markJob      = "job-state"
	markBatches  = "batches"
	markBatch    = "batch-state"
)

// uiTargets are the ids and values the pages are about, found in the
// seeded data.
type uiTargets struct {
	key       string // a key of the large group with a few jobs, pending and finished
	discarded int64  // a discarded job with errors recorded
	waiting   int64  // a pending job waiting behind an earlier one of its key
	bottom    int64  // an id near the large group's oldest job
}

// uiPageNames are the pages' names, in the report's order (for --pages).
var uiPageNames = []string{
	"overview", "map-256", "map-16",
	"jobs", "jobs-pending", "jobs-completed", "jobs-discarded", "jobs-cancelled", "jobs-running",
	"jobs-rare-kind", "jobs-key", "jobs-partition", "jobs-batch",
	"jobs-discarded-kind", "jobs-pending-partition", "jobs-completed-kind-partition", "jobs-key-pending",
	"jobs-next-5", "jobs-discarded-next-3", "jobs-bottom",
	"job-discarded", "job-waiting", "batches", "batch-big",
}

// pages returns the pages to measure: the contract's routes with values
// found in the data (the deep pages by following a#next, as an operator
// paging would), restricted to --pages.
func (b *uiBench) pages(ctx context.Context, m *uiMeter, sd seeded) ([]uiPage, error) {
	tg, err := b.targets(ctx)
	if err != nil {
		return nil, fmt.Errorf("find the pages' targets: %w", err)
	}
	big := uiGroups[0].name
	small := uiGroups[1].name
	jobs := func(q string) string { return "/jobs?group=" + big + q }
	bigBatch := sd.batches[uiBatches[0].name]
	all := []uiPage{
		{"overview", "/", markOverview, "overview: groups, members, throughput"},
		{"map-256", "/groups/" + big, markMap, "ownership map, 256 partitions"},
		{"map-16", "/groups/" + small, markMap, "ownership map, 16 partitions"},
		{"jobs", jobs(""), markJobs, "jobs, unfiltered"},
		{"jobs-pending", jobs("&state=pending"), markJobs, "state pending"},
		{"jobs-completed", jobs("&state=completed"), markJobs, "state completed"},
		{"jobs-discarded", jobs("&state=discarded"), markJobs, "state discarded"},
		{"jobs-cancelled", jobs("&state=cancelled"), markJobs, "state cancelled"},
		{"jobs-running", jobs("&state=running"), markJobs, "running (published)"},
		{"jobs-rare-kind", jobs("&kind=" + uiRareKind), markJobs, "kind " + uiRareKind + " (1 in 10,000)"},
		{"jobs-key", jobs("&key=" + url.QueryEscape(tg.key)), markJobs, "key " + tg.key},
		{"jobs-partition", jobs("&partition=17"), markJobs, "partition 17"},
		{"jobs-batch", "/jobs?group=" + small + "&batch=" + strconv.FormatInt(bigBatch, 10), markJobs, "the big batch's items"},
		{"jobs-discarded-kind", jobs("&state=discarded&kind=webhook.deliver"), markJobs, "discarded + kind"},
		{"jobs-pending-partition", jobs("&state=pending&partition=17"), markJobs, "pending + partition"},
		{"jobs-completed-kind-partition", jobs("&state=completed&kind=sms.send&partition=3"), markJobs, "completed + kind + partition"},
		{"jobs-key-pending", jobs("&key=" + url.QueryEscape(tg.key) + "&state=pending"), markJobs, "key + pending"},
		{"jobs-next-5", "", markJobs, "unfiltered, 6th page (a#next x5)"},
		{"jobs-discarded-next-3", "", markJobs, "discarded, 4th page (a#next x3)"},
		{"jobs-bottom", jobs("&before=" + strconv.FormatInt(tg.bottom, 10)), markJobs, "before= the oldest jobs"},
		{"job-discarded", "/jobs/" + strconv.FormatInt(tg.discarded, 10), markJob, "discarded job, errors"},
		{"job-waiting", "/jobs/" + strconv.FormatInt(tg.waiting, 10), markJob, "pending job waiting behind another"},
		{"batches", "/batches?group=" + small, markBatches, "batches of a group"},
		{"batch-big", "/batches/" + strconv.FormatInt(bigBatch, 10), markBatch, "the big batch"},
	}
	var out []uiPage
	for _, p := range all {
		if len(b.f.pages) > 0 && !slices.Contains(b.f.pages, p.name) {
			continue
		}
		var err error
		var n, want int
		switch p.name {
		case "jobs-next-5":
			want = 5
			p.path, n, err = m.follow(ctx, jobs(""), want)
		case "jobs-discarded-next-3":
			want = 3
			p.path, n, err = m.follow(ctx, jobs("&state=discarded"), want)
		}
		if err != nil {
			return nil, fmt.Errorf("page %s: %w", p.name, err)
		}
		if n < want {
			p.what += fmt.Sprintf(" (the listing ended after %d)", n)
		}
		out = append(out, p)
	}
	for _, n := range b.f.pages {
		if !slices.Contains(uiPageNames, n) {
			return nil, fmt.Errorf("unknown page %q in --pages (known: %v)", n, uiPageNames)
		}
	}
	return out, nil
}

// targets finds the pages' subjects in the large group: a key with a few
// jobs both pending and finished, a discarded job with several errors,
// a pending job waiting behind an earlier one of its key (due, if one
// is), and an id near the oldest job.
func (b *uiBench) targets(ctx context.Context) (uiTargets, error) {
	var tg uiTargets
	j := b.tables.jobs
	g := uiGroups[0].name
	err := b.ctl.QueryRow(ctx, `SELECT key FROM `+j+` WHERE group_name = $1 AND key <> '' GROUP BY key
		ORDER BY (count(*) BETWEEN 3 AND 12 AND bool_or(state = 'pending') AND bool_or(state <> 'pending')) DESC,
		         bool_or(state = 'pending') DESC, count(*) DESC, key LIMIT 1`, g).Scan(&tg.key)
	if err != nil {
		return tg, fmt.Errorf("key: %w", err)
	}
	err = b.ctl.QueryRow(ctx, `SELECT id FROM `+j+` WHERE group_name = $1 AND state = 'discarded'
		ORDER BY jsonb_array_length(errors) >= 3 DESC, id DESC LIMIT 1`, g).Scan(&tg.discarded)
	if err != nil {
		return tg, fmt.Errorf("discarded job: %w", err)
	}
	err = b.ctl.QueryRow(ctx, `SELECT j.id FROM `+j+` AS j
		WHERE j.group_name = $1 AND j.state = 'pending' AND j.key <> ''
		  AND EXISTS (SELECT FROM `+j+` AS e WHERE e.group_name = j.group_name AND e.partition = j.partition
		              AND e.key = j.key AND e.key <> '' AND e.state = 'pending' AND e.id < j.id
		              AND (e.holds OR e.run_at <= now()))
		ORDER BY j.run_at <= now() DESC, j.id DESC LIMIT 1`, g).Scan(&tg.waiting)
	if err != nil {
		return tg, fmt.Errorf("waiting job: %w", err)
	}
	err = b.ctl.QueryRow(ctx, `SELECT min(id) + 100 FROM `+j+` WHERE group_name = $1`, g).Scan(&tg.bottom)
	if err != nil {
		return tg, fmt.Errorf("oldest job: %w", err)
	}
	return tg, nil
}

var (
	// nextTag finds the jobs list's next-page link, a#next, whatever the
	// order of its attributes.
	nextTag  = regexp.MustCompile(`<a\b[^>]*\bid="next"[^>]*>`)
	hrefAttr = regexp.MustCompile(`\bhref="([^"]*)"`)
	jobRow   = regexp.MustCompile(`\bdata-job="\d+"`)
	scanNote = regexp.MustCompile(`\bid="scan-note"`)
)

// errNoNext is returned by nextHref for a page without a#next.
var errNoNext = errors.New("no a#next link")

// nextHref returns the href of page's a#next, unescaped.
func nextHref(page []byte) (string, error) {
	tag := nextTag.Find(page)
	if tag == nil {
		return "", errNoNext
	}
	m := hrefAttr.FindSubmatch(tag)
	if m == nil {
		return "", fmt.Errorf("%w: a#next has no href: %s", errNoNext, tag)
	}
	return html.UnescapeString(string(m[1])), nil
}

// hasID reports whether page holds an element with id.
func hasID(page []byte, id string) bool {
	return regexp.MustCompile(`\bid="` + regexp.QuoteMeta(id) + `"`).Match(page)
}
