package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/dataloader/dataloader/internal/store"
)

// runContinuous runs a producer and a Manager side by side for the window:
// the producer inserts TriggerMany batches (as fast as it can, or at -rate)
// through its own pool, as another service would, while the Manager works.
func runContinuous(ctx context.Context, b *bench) error {
	dsn, err := b.database(ctx, "continuous")
	if err != nil {
		return err
	}
	st, err := b.openWorker(ctx, dsn, b.o.pool)
	if err != nil {
		return err
	}
	pool := st.Pool()
	defer pool.Close()
	prod, err := b.open(ctx, dsn, 4)
	if err != nil {
		return err
	}
	defer prod.Pool().Close()

	w, err := b.startWorkers(ctx, dsn, st, b.o.concurrency, nil)
	if err != nil {
		return err
	}
	defer w.close()
	// Warm up: connections, prepared statements, one round trip of the loop.
	if _, err := prod.TriggerMany(ctx, noopBatch(-1000, 100, 0), leaseTTL); err != nil {
		return err
	}
	if _, ok := w.waitSucceeded(ctx, 100, 10*time.Second); !ok {
		note("WARNING: warm-up jobs did not finish within 10 s")
	}

	stats := b.statements(pool)
	stats.reset(ctx)
	before := takeProbe(ctx, pool)
	worked0 := w.succeeded()
	start := time.Now()
	end := start.Add(b.o.duration)
	var inserted atomic.Int64
	var perr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		perr = produce(ctx, b, prod.TriggerMany, start, end, &inserted)
	}()
	analyzes := 0
	if b.o.analyzeEvery > 0 {
		t := time.NewTicker(b.o.analyzeEvery)
		for time.Now().Before(end) && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(end)):
			case <-t.C:
				if _, err := prod.Pool().Exec(ctx, "ANALYZE dl_jobs"); err == nil {
					analyzes++
				}
			}
		}
		t.Stop()
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(end)):
	}
	worked := w.succeeded() - worked0
	elapsed := time.Since(start)
	wg.Wait()
	if perr != nil {
		return perr
	}
	rate := "as fast as it can"
	if b.o.rate > 0 {
		rate = fmt.Sprintf("paced at %d jobs/s", b.o.rate)
	}
	note("producer: one goroutine, %d jobs per TriggerMany statement, %s, own pool; Manager concurrency %d", b.o.batch, rate, b.o.concurrency)
	note("window %s: inserted %d, succeeded %d", elapsed.Round(time.Millisecond), inserted.Load(), worked)
	if b.o.analyzeEvery > 0 {
		note("ran ANALYZE dl_jobs %d times during the window (-analyze-every %s)", analyzes, b.o.analyzeEvery)
	}
	figure("continuous_insert_jobs_per_sec", float64(inserted.Load())/elapsed.Seconds(), "jobs/s")
	figure("continuous_worked_jobs_per_sec", float64(worked)/elapsed.Seconds(), "jobs/s")
	before.report(ctx, pool, "continuous", worked)
	if backlog, err := countStatus(ctx, pool, "queued"); err == nil {
		note("backlog left queued at the end of the window: %d", backlog)
	}
	if err := w.close(); err != nil {
		return err
	}
	w.summary()
	stats.top(ctx, "continuous", 8)
	return nil
}

type triggerFunc = func(context.Context, []store.NewJob, int) ([]uuid.UUID, error)

// produce inserts batches until end, counting the jobs of committed batches
// that were committed before end.
func produce(ctx context.Context, b *bench, trigger triggerFunc, start, end time.Time, inserted *atomic.Int64) error {
	next := 0
	for ctx.Err() == nil && time.Now().Before(end) {
		if b.o.rate > 0 {
			due := start.Add(time.Duration(float64(next) / float64(b.o.rate) * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				if due.After(end) {
					return nil
				}
				time.Sleep(d)
			}
		}
		if _, err := trigger(ctx, noopBatch(next, b.o.batch, b.o.lockKeys), leaseTTL); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		next += b.o.batch
		if time.Now().Before(end) {
			inserted.Add(int64(b.o.batch))
		}
	}
	return nil
}
