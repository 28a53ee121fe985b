package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux architecture Go runs on).
const clockTicks = 100

// procStat is what the suite reads of /proc/<pid>/stat.
type procStat struct {
	ppid int
	// cpu is the process's user and system time plus that of its children
	// it has waited for (utime + stime + cutime + cstime).
	cpu time.Duration
}

// readProcStat reads /proc/<pid>/stat.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3, state
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var s procStat
	s.ppid, _ = strconv.Atoi(f[1])
	var ticks int64
	for _, x := range f[11:15] { // utime, stime, cutime, cstime
		n, _ := strconv.ParseInt(x, 10, 64)
		ticks += n
	}
	s.cpu = time.Duration(ticks) * time.Second / clockTicks
	return s, nil
}

// postmasterPID returns the pid of the server's postmaster: the parent of
// the admin connection's backend, when that backend is on this machine.
func postmasterPID(ctx context.Context, admin *pgxpool.Pool) (int, error) {
	var backend int
	if err := admin.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return 0, err
	}
	s, err := readProcStat(backend)
	if err != nil {
		return 0, fmt.Errorf("the server is not on this machine (backend pid %d): %w", backend, err)
	}
	if _, err := readProcStat(s.ppid); err != nil || s.ppid <= 1 {
		return 0, fmt.Errorf("no postmaster above backend %d", backend)
	}
	return s.ppid, nil
}

// serverUsage is what the server's processes have used.
type serverUsage struct {
	cpu time.Duration
	// switches is the live processes' voluntary context switches: each
	// is a backend that slept (waiting for a message, a lock, a flush) and
	// was woken, which on a virtual machine costs more than the work many
	// statements do. Exited processes' are lost (not inherited as their
	// CPU is), so it is exact only over a window no backend exits in.
	switches int64
}

// readServerUsage returns the CPU time the server's processes have used
// (the postmaster's and its live children's own and reaped children's
// times: a backend that exits is reaped by the postmaster, whose children's
// times then hold it, so a difference of two readings counts every process
// that ran in between, however briefly) and its live processes' voluntary
// context switches. Zero when the postmaster is unknown.
func readServerUsage(postmaster int) serverUsage {
	if postmaster == 0 {
		return serverUsage{}
	}
	pm, err := readProcStat(postmaster)
	if err != nil {
		return serverUsage{}
	}
	u := serverUsage{cpu: pm.cpu, switches: voluntarySwitches(postmaster)}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == postmaster {
			continue
		}
		if s, err := readProcStat(pid); err == nil && s.ppid == postmaster {
			u.cpu += s.cpu
			u.switches += voluntarySwitches(pid)
		}
	}
	return u
}

// voluntarySwitches reads a process's voluntary context switches from
// /proc/<pid>/status (0 when it is gone).
func voluntarySwitches(pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	const key = "voluntary_ctxt_switches:"
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// dbXacts returns database db's committed plus rolled-back transactions
// (pg_stat_database), read over the admin connection on another database.
func (e *fleetEnv) dbXacts(ctx context.Context, db string) (int64, error) {
	return (&partitionsEnv{admin: e.srv.admin, dbName: db}).xacts(ctx)
}

// fleetStmt is one statement's line of pg_stat_statements.
type fleetStmt struct {
	Query   string  `json:"query"`
	Calls   int64   `json:"calls"`
	TotalMs float64 `json:"total_ms"`
	// PlanMs is the statement's planning time (pg_stat_statements'
	// total_plan_time: track_planning is on in the suite's server).
	PlanMs float64 `json:"plan_ms"`
	// Plans is how many times it was planned (a statement on its cached
	// generic plan is planned once per backend, not per call).
	Plans  int64   `json:"plans"`
	PerJob float64 `json:"calls_per_job,omitempty"`
}

// resetStatements empties pg_stat_statements, when loaded.
func (e *fleetEnv) resetStatements(ctx context.Context) error {
	if !e.statements {
		return nil
	}
	_, err := e.srv.admin.Exec(ctx, "SELECT pg_stat_statements_reset()")
	return err
}

// readStatements returns the calls of every statement run in database db
// since the last reset, and its top statements by total execution time.
func (e *fleetEnv) readStatements(ctx context.Context, db string, top int) (calls int64, stmts []fleetStmt, err error) {
	if !e.statements {
		return 0, nil, nil
	}
	rows, err := e.srv.admin.Query(ctx, `SELECT query, calls, plans, total_exec_time, total_plan_time, sum(calls) OVER ()
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)
		ORDER BY total_exec_time + total_plan_time DESC`, db)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var s fleetStmt
		var sum float64
		if err := rows.Scan(&s.Query, &s.Calls, &s.Plans, &s.TotalMs, &s.PlanMs, &sum); err != nil {
			return 0, nil, err
		}
		calls = int64(sum)
		if len(stmts) < top {
			s.Query = strings.Join(strings.Fields(s.Query), " ")
			stmts = append(stmts, s)
		}
	}
	return calls, stmts, rows.Err()
}

// clientMem is this process's heap in use, after a collection, and its
// goroutines.
type clientMem struct {
	heap       uint64
	goroutines int
}

// readClientMem collects garbage and reads the heap in use and the
// goroutine count.
func readClientMem() clientMem {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return clientMem{heap: m.HeapInuse, goroutines: runtime.NumGoroutine()}
}

// serverReading is the server's counters at one instant, for a window.
type serverReading struct {
	at     time.Time
	usage  serverUsage
	xacts  int64
	dbName string
}

// readServer resets pg_stat_statements and reads database db's
// transactions and the server's CPU time: a window's start.
func (e *fleetEnv) readServer(ctx context.Context, db string) (serverReading, error) {
	if err := e.resetStatements(ctx); err != nil {
		return serverReading{}, err
	}
	x, err := e.dbXacts(ctx, db)
	return serverReading{at: time.Now(), usage: readServerUsage(e.postmaster), xacts: x, dbName: db}, err
}

// windowCost is what the server spent in a window.
type windowCost struct {
	elapsed  time.Duration
	cpu      time.Duration
	switches int64 // the server's voluntary context switches (see serverUsage)
	xacts    int64
	calls    int64
	top      []fleetStmt
}

// since reads the server's counters again and returns their growth since
// r, with the window's top 5 statements.
func (e *fleetEnv) since(ctx context.Context, r serverReading) (windowCost, error) {
	u := readServerUsage(e.postmaster)
	c := windowCost{elapsed: time.Since(r.at), cpu: u.cpu - r.usage.cpu, switches: u.switches - r.usage.switches}
	x, err := e.dbXacts(ctx, r.dbName)
	if err != nil {
		return c, err
	}
	c.xacts = x - r.xacts
	c.calls, c.top, err = e.readStatements(ctx, r.dbName, 5)
	return c, err
}
