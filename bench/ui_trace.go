package main

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/store"
)

// stmtTracer times the statements the UI's pool runs, by name, for the
// page being requested: with --concurrency 1 every statement belongs to
// the one request in flight, so a slow page's time can be put on its
// statements. (With more clients it is not recorded.)
type stmtTracer struct {
	names map[string]string // SQL text -> its name in store.Statements
	mu    sync.Mutex
	page  string                          // the page requested now ("": none)
	byPg  map[string]map[string]*stmtTime // page -> statement -> time
}

// stmtTime sums up one statement's runs on one page.
type stmtTime struct {
	n     int
	total time.Duration
	max   time.Duration
}

type stmtStartKey struct{}

// newStmtTracer names the statements of store.For(schema) by their field
// paths ("Queue.Stats").
func newStmtTracer(schema string) (*stmtTracer, error) {
	st, err := store.For(schema)
	if err != nil {
		return nil, err
	}
	t := &stmtTracer{names: map[string]string{}, byPg: map[string]map[string]*stmtTime{}}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				f := v.Type().Field(i)
				if f.IsExported() {
					walk(v.Field(i), strings.TrimPrefix(path+"."+f.Name, "."))
				}
			}
		case reflect.String:
			if strings.ContainsAny(v.String(), " \n") { // SQL, not a channel or schema name
				t.names[v.String()] = path
			}
		}
	}
	walk(reflect.ValueOf(*st), "")
	return t, nil
}

// name returns sql's name in store.Statements, or its first words.
func (t *stmtTracer) name(sql string) string {
	if n, ok := t.names[sql]; ok {
		return n
	}
	s := strings.Join(strings.Fields(sql), " ")
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}

// setPage makes the statements that start from now count for page.
func (t *stmtTracer) setPage(page string) {
	t.mu.Lock()
	t.page = page
	t.mu.Unlock()
}

// TraceQueryStart implements pgx.QueryTracer.
func (t *stmtTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.mu.Lock()
	page := t.page
	t.mu.Unlock()
	if page == "" {
		return ctx
	}
	return context.WithValue(ctx, stmtStartKey{}, stmtStart{page: page, sql: d.SQL, at: time.Now()})
}

type stmtStart struct {
	page, sql string
	at        time.Time
}

// TraceQueryEnd implements pgx.QueryTracer. (A query's time runs until its
// last row is read.)
func (t *stmtTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	s, ok := ctx.Value(stmtStartKey{}).(stmtStart)
	if !ok {
		return
	}
	d := time.Since(s.at)
	name := t.name(s.sql)
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.byPg[s.page]
	if m == nil {
		m = map[string]*stmtTime{}
		t.byPg[s.page] = m
	}
	x := m[name]
	if x == nil {
		x = &stmtTime{}
		m[name] = x
	}
	x.n++
	x.total += d
	x.max = max(x.max, d)
}

// StmtShare is one statement's part of a page's requests.
type StmtShare struct {
	Statement string `json:"statement"`
	// PerRequest is how many times a request ran it; MeanMs its mean time
	// per run, MaxMs its longest run, TotalPerRequestMs its time per
	// request (all runs).
	PerRequest        float64 `json:"per_request"`
	MeanMs            float64 `json:"mean_ms"`
	MaxMs             float64 `json:"max_ms"`
	TotalPerRequestMs float64 `json:"total_per_request_ms"`
}

// shares returns page's statements, the most time per request first, for
// requests requests.
func (t *stmtTracer) shares(page string, requests int) []StmtShare {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []StmtShare
	for name, x := range t.byPg[page] {
		out = append(out, StmtShare{Statement: name, PerRequest: float64(x.n) / float64(max(requests, 1)),
			MeanMs: ms(x.total) / float64(x.n), MaxMs: ms(x.max), TotalPerRequestMs: ms(x.total) / float64(max(requests, 1))})
	}
	slices.SortFunc(out, func(a, b StmtShare) int {
		switch {
		case a.TotalPerRequestMs > b.TotalPerRequestMs:
			return -1
		case a.TotalPerRequestMs < b.TotalPerRequestMs:
			return 1
		}
		return strings.Compare(a.Statement, b.Statement)
	})
	return out
}
