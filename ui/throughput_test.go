package ui_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/ui"
)

// checkBarsAligned checks a group's throughput figure: one table whose
// heading has a column per minute, and whose bars row holds, in each
// minute's column, that minute's bar: a completed (failed) rect of nonzero
// height exactly where the column's completed (failed) count is nonzero.
// A chart drawn apart from the table (so that its bars need not line up
// with the counts) fails it.
func checkBarsAligned(fig *nodeT) error {
	tables := all(fig, func(n *nodeT) bool { return n.Data == "table" && hasClass(n, "minutes") })
	if len(tables) != 1 {
		return fmt.Errorf("#throughput: %d table.minutes; want 1", len(tables))
	}
	if n := len(all(fig, func(n *nodeT) bool { return n.Data == "svg" })); n != len(all(tables[0], func(n *nodeT) bool { return n.Data == "svg" })) {
		return fmt.Errorf("#throughput: a chart outside the minutes' table")
	}
	rows := map[string][]*nodeT{}
	for _, tr := range all(tables[0], func(n *nodeT) bool { return n.Data == "tr" }) {
		var cells []*nodeT
		for c := tr.FirstChild; c != nil; c = c.NextSibling {
			if c.Data == "td" || c.Data == "th" {
				cells = append(cells, c)
			}
		}
		switch {
		case tr.Parent.Data == "thead":
			rows["minutes"] = cells
		default:
			rows[attr(tr, "class")] = cells
		}
	}
	minutes, bars, ok, bad := rows["minutes"], rows["bars"], rows["completed"], rows["failed"]
	if len(minutes) < 2 || len(bars) != len(minutes) || len(ok) != len(minutes) || len(bad) != len(minutes) {
		return fmt.Errorf("#throughput: rows of %d minute headings, %d bars, %d completed, %d failed cells; want the same", len(minutes), len(bars), len(ok), len(bad))
	}
	height := func(cell *nodeT, class string) int {
		rs := all(cell, func(n *nodeT) bool { return n.Data == "rect" && hasClass(n, class) })
		if len(rs) != 1 {
			return -1
		}
		h, err := strconv.Atoi(attr(rs[0], "height"))
		if err != nil {
			return -1
		}
		return h
	}
	drawn := 0
	for i := 1; i < len(minutes); i++ {
		m := text(minutes[i])
		for _, c := range []struct {
			class string
			count string
		}{{"ok", text(ok[i])}, {"bad", text(bad[i])}} {
			h := height(bars[i], c.class)
			if h < 0 {
				return fmt.Errorf("#throughput: minute %s: no single rect.%s with a height in its bar cell", m, c.class)
			}
			if (c.count != "0") != (h > 0) {
				return fmt.Errorf("#throughput: minute %s counts %s but its rect.%s is %d high", m, c.count, c.class, h)
			}
			drawn += h
		}
	}
	if drawn == 0 {
		return fmt.Errorf("#throughput: no bar drawn")
	}
	return nil
}

// TestThroughputNoRuns checks that a group with no run in the window shows
// one line saying so, not an empty chart and a table of zeros.
func TestThroughputNoRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ui.Config{})
	r := e.page("/")
	figs := withAttr(byID(r.Doc, "throughput"), "data-group", "emails")
	if len(figs) != 1 {
		t.Fatalf("#throughput: %d figures for emails; want 1", len(figs))
	}
	if !strings.Contains(text(figs[0]), "no runs recorded in the last 15 minutes") {
		t.Errorf("#throughput of a group with no run = %q; want it to say no runs were recorded", text(figs[0]))
	}
	if n := len(all(figs[0], func(n *nodeT) bool { return n.Data == "svg" || n.Data == "table" })); n != 0 {
		t.Errorf("#throughput of a group with no run has %d charts or tables; want none", n)
	}
}

// TestCheckBarsAlignedCatchesMisalignment is checkBarsAligned's negative
// control: bars one column off their counts, and a chart apart from the
// table, fail it; the aligned figure passes.
func TestCheckBarsAlignedCatchesMisalignment(t *testing.T) {
	bar := func(ok, bad int) string {
		return fmt.Sprintf(`<td class="bar"><svg><rect class="ok" height="%d"></rect><rect class="bad" height="%d"></rect></svg></td>`, ok, bad)
	}
	figure := func(chart, bars string) string {
		return `<figure>` + chart + `<table class="minutes"><thead><tr><th>minute</th><th>02:40</th><th>02:41</th><th>02:46</th></tr></thead><tbody>` +
			`<tr class="bars"><th>runs</th>` + bars + `</tr>` +
			`<tr class="completed"><th>completed</th><td>0</td><td>0</td><td>5</td></tr>` +
			`<tr class="failed"><th>failed</th><td>0</td><td>0</td><td>1</td></tr></tbody></table></figure>`
	}
	aligned := figure("", bar(0, 0)+bar(0, 0)+bar(30, 10))
	if err := checkBarsAligned(parse(t, aligned)); err != nil {
		t.Fatalf("aligned figure: %v", err)
	}
	for name, doc := range map[string]string{
		"bars one column off": figure("", bar(0, 0)+bar(30, 10)+bar(0, 0)),
		"chart apart":         figure(`<svg><rect class="ok" height="40"></rect></svg>`, bar(0, 0)+bar(0, 0)+bar(30, 10)),
		"no bars row":         strings.Replace(aligned, `class="bars"`, `class="x"`, 1),
	} {
		if err := checkBarsAligned(parse(t, doc)); err == nil {
			t.Errorf("%s: checkBarsAligned passed", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
