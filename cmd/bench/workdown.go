package main

import (
	"context"
	"fmt"
	"time"
)

// runWorkdown inserts a backlog, then times one Manager until every job of
// it has succeeded (committed, as the Manager's outcome counter and a final
// count in SQL agree).
func runWorkdown(ctx context.Context, b *bench) error {
	dsn, err := b.database(ctx, "workdown")
	if err != nil {
		return err
	}
	st, err := b.openWorker(ctx, dsn, b.o.pool)
	if err != nil {
		return err
	}
	pool := st.Pool()
	defer pool.Close()
	n := b.o.jobs

	took, err := triggerMany(ctx, st, n, b.o.insertBatch, b.o.lockKeys)
	if err != nil {
		return err
	}
	keys := "one lock_key per job"
	if b.o.lockKeys > 0 {
		keys = fmt.Sprintf("%d shared lock_keys", b.o.lockKeys)
	}
	note("inserted %d no-op jobs with TriggerMany (%d per statement, %s) in %s", n, b.o.insertBatch, keys, took.Round(time.Millisecond))
	figure("workdown_insert_jobs_per_sec", float64(n)/took.Seconds(), "jobs/s")
	vac, err := vacuumAnalyze(ctx, pool)
	if err != nil {
		return err
	}
	note("VACUUM ANALYZE took %s", vac.Round(time.Millisecond))

	stats := b.statements(pool)
	stats.reset(ctx)
	before := takeProbe(ctx, pool)
	start := time.Now()
	w, err := b.startWorkers(ctx, dsn, st, b.o.concurrency, nil)
	if err != nil {
		return err
	}
	progress := time.NewTicker(5 * time.Second)
	defer progress.Stop()
	end, ok := start, false
	for deadline := start.Add(5 * time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; {
		if end, ok = w.waitSucceeded(ctx, int64(n), 250*time.Millisecond); ok {
			break
		}
		select {
		case <-progress.C:
			b.log.Info("workdown progress", "succeeded", w.succeeded(), "handled", w.handled.Load())
		default:
		}
	}
	elapsed := end.Sub(start)
	done := w.succeeded()
	if !ok {
		note("WARNING: only %d of %d jobs succeeded before giving up", done, n)
	}
	note("worked down %d jobs in %s with concurrency %d (one Manager, one queue, timed from Manager start)", done, elapsed.Round(time.Millisecond), b.o.concurrency)
	figure("workdown_jobs_per_sec", float64(done)/elapsed.Seconds(), "jobs/s")
	before.report(ctx, pool, "workdown", done)
	if err := w.close(); err != nil {
		return err
	}
	w.summary()
	stats.top(ctx, "workdown", 8)
	if got, err := countStatus(ctx, pool, "succeeded"); err != nil || got != int64(n) {
		note("WARNING: SQL count of succeeded jobs is %d (want %d), err %v", got, n, err)
	} else {
		note("checked in SQL: %d jobs succeeded", got)
	}
	return nil
}
