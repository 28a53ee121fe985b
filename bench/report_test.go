package main

import (
	"encoding/json"
	"os"
	"testing"
)

// checkReport checks the --json report at path: the suite, one round, a
// plausible result for every case on both systems, and a ratio per case;
// and a plausible result of leasehold alone for each of solo.
func checkReport(t *testing.T, path, suite string, cases []string, solo ...string) {
	t.Helper()
	rep := readReport(t, path)
	if rep.Suite != suite || rep.Rounds != 1 {
		t.Errorf("suite %q rounds %d, want %s 1", rep.Suite, rep.Rounds, suite)
	}
	got := map[[2]string]Result{}
	for _, r := range rep.Results {
		got[[2]string{r.System, r.Case}] = r
	}
	for _, c := range cases {
		for _, sys := range []string{sysLeasehold, sysRaw} {
			r, ok := got[[2]string{sys, c}]
			switch {
			case !ok:
				t.Errorf("no result for %s on %s", c, sys)
			case r.JobsPerSec <= 0 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms:
				t.Errorf("%s on %s: implausible %+v", c, sys, r)
			}
		}
		if rep.Ratios[c] <= 0 {
			t.Errorf("ratio for %s is %v", c, rep.Ratios[c])
		}
	}
	for _, c := range solo {
		if r, ok := got[[2]string{sysLeasehold, c}]; !ok || r.JobsPerSec <= 0 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms {
			t.Errorf("%s on %s: missing or implausible %+v", c, sysLeasehold, r)
		}
	}
	if len(rep.Results) != 2*len(cases)+len(solo) || len(rep.Ratios) != len(cases) {
		t.Errorf("%d results and %d ratios, want %d and %d", len(rep.Results), len(rep.Ratios), 2*len(cases)+len(solo), len(cases))
	}
}

// readReport reads a --json report.
func readReport(t *testing.T, path string) Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, b)
	}
	return rep
}
