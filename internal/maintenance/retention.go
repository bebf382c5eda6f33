package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dataloader/dataloader/internal/store"
)

// Retention defaults.
const (
	DefaultRetentionBatch  = 1000
	DefaultRetentionPeriod = time.Minute
	// retentionMaxBatches bounds one pass, so a huge backlog is worked off
	// over several periods instead of in one long burst.
	retentionMaxBatches = 500
)

// Retention deletes finished jobs (succeeded, failed, canceled, lost) and
// their events once they finished more than Age ago. Each batch is one
// short statement over at most Batch jobs, taken oldest first with SKIP
// LOCKED: no long transaction, no lock held between batches, and a job that
// is queued or running (or being retried right now) is never touched. Every
// replica may run it.
type Retention struct {
	Store  *store.Store
	Age    time.Duration // 0 disables retention
	Period time.Duration // between passes; default one minute
	Batch  int           // jobs per statement; default 1000
	Log    *slog.Logger
	// Deleted counts what retention removed, by kind (jobs, events); nil
	// records nothing.
	Deleted *prometheus.CounterVec
}

// NewRetentionCounter returns the dataloader_retention_deleted_total
// counter (label kind: jobs or events) registered on reg.
func NewRetentionCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dataloader_retention_deleted_total",
		Help: "Finished jobs and their journal events deleted by retention (DL_RETENTION_HOURS)."}, []string{"kind"})
	reg.MustRegister(c)
	c.WithLabelValues("jobs")
	c.WithLabelValues("events")
	return c
}

// Run deletes expired jobs every Period until ctx ends. With Age 0 it
// returns at once.
func (r *Retention) Run(ctx context.Context) error {
	if r.Age <= 0 {
		return nil
	}
	period := r.Period
	if period <= 0 {
		period = DefaultRetentionPeriod
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if jobs, events, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			r.Log.Error("retention pass failed", "error", err)
		} else if jobs > 0 {
			r.Log.Info("retention deleted finished jobs", "jobs", jobs, "events", events, "older_than", r.Age)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RunOnce deletes, batch by batch, the jobs that finished before now − Age
// and returns how many jobs and events it deleted (none when Age is 0).
func (r *Retention) RunOnce(ctx context.Context) (jobs, events int64, err error) {
	if r.Age <= 0 {
		return 0, 0, nil
	}
	batch := r.Batch
	if batch <= 0 {
		batch = DefaultRetentionBatch
	}
	cutoff := time.Now().Add(-r.Age)
	for i := 0; i < retentionMaxBatches; i++ {
		j, e, err := r.Store.DeleteFinished(ctx, cutoff, batch)
		if err != nil {
			return jobs, events, err
		}
		jobs, events = jobs+j, events+e
		if r.Deleted != nil {
			r.Deleted.WithLabelValues("jobs").Add(float64(j))
			r.Deleted.WithLabelValues("events").Add(float64(e))
		}
		if j < int64(batch) {
			return jobs, events, nil
		}
		// A breath between batches lets autovacuum and the queue's own
		// statements through.
		select {
		case <-ctx.Done():
			return jobs, events, nil
		case <-time.After(10 * time.Millisecond):
		}
	}
	return jobs, events, nil
}
