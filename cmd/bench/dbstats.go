package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// probe snapshots what a timed phase cost outside the Go code: CPU split
// between this process and the rest of the machine (the PostgreSQL
// backends), committed transactions, WAL written and WAL flushes.
type probe struct {
	at                  time.Time
	cpuTotal, cpuIdle   uint64 // /proc/stat ticks, all CPUs
	cpuSelf             uint64 // /proc/self/stat utime+stime
	commits, walBytes   int64
	walSyncs, walWrites int64
	ok                  bool
}

func takeProbe(ctx context.Context, pool *pgxpool.Pool) probe {
	p := probe{at: time.Now()}
	p.cpuTotal, p.cpuIdle = machineCPU()
	p.cpuSelf = selfCPU()
	err := pool.QueryRow(ctx, `SELECT
	    (SELECT sum(xact_commit)::bigint FROM pg_stat_database),
	    (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint,
	    (SELECT wal_sync FROM pg_stat_wal), (SELECT wal_write FROM pg_stat_wal)`).
		Scan(&p.commits, &p.walBytes, &p.walSyncs, &p.walWrites)
	p.ok = err == nil
	return p
}

// report prints the difference to a later probe, per job when jobs > 0.
// Server counters are flushed by backends about once a second, so over short
// phases they are approximate; WAL bytes are exact.
func (p probe) report(ctx context.Context, pool *pgxpool.Pool, what string, jobs int64) {
	cpuTotal, cpuIdle := machineCPU()
	cpuSelf := selfCPU()
	if total := float64(cpuTotal - p.cpuTotal); total > 0 {
		self := float64(cpuSelf-p.cpuSelf) / total
		idle := float64(cpuIdle-p.cpuIdle) / total
		note("%s cpu (all cores): bench process %.0f%%, other (postgres) %.0f%%, idle+iowait %.0f%%",
			what, 100*self, 100*(1-self-idle), 100*idle)
	}
	time.Sleep(1100 * time.Millisecond) // let backends flush their statistics
	q := takeProbe(ctx, pool)
	if !p.ok || !q.ok {
		return
	}
	commits, wal := q.commits-p.commits, q.walBytes-p.walBytes
	syncs, writes := q.walSyncs-p.walSyncs, q.walWrites-p.walWrites
	line := fmt.Sprintf("%s server: %d commits, %d WAL flushes (fsync), %d WAL writes, %.1f MB WAL", what, commits, syncs, writes, float64(wal)/1e6)
	if jobs > 0 {
		line += fmt.Sprintf("; per job: %.3f commits, %.0f WAL bytes", float64(commits)/float64(jobs), float64(wal)/float64(jobs))
	}
	note("%s", line)
}

// machineCPU returns total and idle (idle+iowait) ticks of all CPUs.
func machineCPU() (total, idle uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0
	}
	for i, s := range f[1:] {
		if i >= 8 { // guest time is already in user
			break
		}
		v, _ := strconv.ParseUint(s, 10, 64)
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return total, idle
}

// selfCPU returns this process's user+system ticks.
func selfCPU() uint64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	k, _ := strconv.ParseUint(f[12], 10, 64)
	return u + k
}

// statements resets or prints pg_stat_statements when -statements is on.
type statements struct {
	on   bool
	pool *pgxpool.Pool
}

func (b *bench) statements(pool *pgxpool.Pool) statements {
	return statements{on: b.o.statements, pool: pool}
}

func (s statements) reset(ctx context.Context) {
	if s.on {
		_, _ = s.pool.Exec(ctx, "SELECT pg_stat_statements_reset()")
	}
}

// top prints the statements with the most total execution time.
func (s statements) top(ctx context.Context, what string, n int) {
	if !s.on {
		return
	}
	rows, err := s.pool.Query(ctx, `SELECT query, calls, total_exec_time, mean_exec_time, rows, total_plan_time, plans
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time + total_plan_time DESC LIMIT $1`, n)
	if err != nil {
		note("pg_stat_statements: %v", err)
		return
	}
	defer rows.Close()
	note("%s: top statements by server time (pg_stat_statements; commit and WAL flush not included)", what)
	for rows.Next() {
		var q string
		var calls, nrows, plans int64
		var total, mean, plan float64
		if err := rows.Scan(&q, &calls, &total, &mean, &nrows, &plan, &plans); err != nil {
			return
		}
		note("  exec %7.0f ms total %7.3f ms mean | plan %6.0f ms total in %6d plannings | %7d calls %8d rows  %s",
			total, mean, plan, plans, calls, nrows, statementName(q))
	}
}

// statementName is the sqlc name of a query ("-- name: JobClaim :many"), or
// its first 70 characters.
func statementName(q string) string {
	if rest, ok := strings.CutPrefix(q, "-- name: "); ok {
		name, _, _ := strings.Cut(rest, " ")
		return name
	}
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 70 {
		q = q[:70] + "…"
	}
	return q
}
