// Package maintenance runs the periodic upkeep every replica may run at
// once: the reaper, which returns jobs whose lease expired to the queue, and
// the pruning of stale worker registry rows.
package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/metrics"
	"github.com/dataloader/dataloader/internal/store"
)

// reapBatch bounds one reaper statement so that a mass expiry (a whole
// replica died) is handled in short transactions.
const reapBatch = 200

// Reaper returns running jobs whose lease expired to queued, or marks them
// lost when no attempts remain. It is safe to run in every replica: rows are
// claimed with SKIP LOCKED and re-checked under lock.
type Reaper struct {
	Store  *store.Store
	Period time.Duration
	Name   string // recorded in the reaped event, e.g. the worker id
	Log    *slog.Logger
	Met    *metrics.Metrics
}

// Run reaps every Period until ctx ends.
func (r *Reaper) Run(ctx context.Context) error {
	t := time.NewTicker(r.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := r.ReapOnce(ctx); err != nil && ctx.Err() == nil {
			r.Log.Error("reaper pass failed", "error", err)
		}
		if err := r.Store.DeleteStaleWorkers(ctx, 10*r.Period+time.Minute); err != nil && ctx.Err() == nil {
			r.Log.Warn("pruning stale workers failed", "error", err)
		}
	}
}

// ReapOnce runs one full pass and returns how many jobs it rescued.
func (r *Reaper) ReapOnce(ctx context.Context) (int, error) {
	start := time.Now()
	defer func() { r.Met.ReaperSeconds.Observe(time.Since(start).Seconds()) }()
	total := 0
	for {
		rescued, err := r.Store.RescueExpired(ctx, r.Name, reapBatch)
		if err != nil {
			return total, err
		}
		for _, j := range rescued {
			r.Met.Reaped.WithLabelValues(string(j.Status)).Inc()
			lvl := slog.LevelWarn
			if j.Status == job.StatusLost {
				lvl = slog.LevelError
			}
			r.Log.Log(ctx, lvl, "lease expired", "job_id", j.JobID, "queue", j.Queue, "status", j.Status)
		}
		total += len(rescued)
		if len(rescued) < reapBatch {
			return total, nil
		}
	}
}
