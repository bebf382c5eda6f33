package maintenance_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/maintenance"
)

func TestRetentionDeletesOldFinishedJobsWithTheirEventsAndNothingElse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// mk makes a job in the given status that finished `ago` (queued and
	// running ones get a finished_at too: retention must look at the status).
	mk := func(status job.Status, ago time.Duration) uuid.UUID {
		res, err := e.store.Trigger(ctx, job.TriggerParams{Queue: "q", Task: "t", LockKey: uuid.NewString()}, 60)
		if err != nil {
			t.Fatal(err)
		}
		e.scalar(`WITH u AS (UPDATE dl_jobs SET status = $2::dl_status, finished_at = now() - make_interval(secs => $3)
			WHERE job_id = $1 RETURNING 1) SELECT count(*) FROM u`, res.JobID, string(status), ago.Seconds())
		e.scalar(`WITH i AS (INSERT INTO dl_job_events (job_id, queue, kind) VALUES ($1, 'q', 'picked'), ($1, 'q', 'done')
			RETURNING 1) SELECT count(*) FROM i`, res.JobID)
		return res.JobID
	}
	old := 10 * 24 * time.Hour
	var doomed, kept []uuid.UUID
	for _, s := range []job.Status{job.StatusSucceeded, job.StatusSucceeded, job.StatusSucceeded, job.StatusFailed, job.StatusCanceled, job.StatusLost} {
		doomed = append(doomed, mk(s, old))
	}
	kept = append(kept, mk(job.StatusSucceeded, time.Hour), mk(job.StatusQueued, old), mk(job.StatusRunning, old))
	never := mk(job.StatusFailed, old)
	e.scalar("WITH u AS (UPDATE dl_jobs SET finished_at = NULL WHERE job_id = $1 RETURNING 1) SELECT count(*) FROM u", never)
	kept = append(kept, never)

	deleted := maintenance.NewRetentionCounter(prometheus.NewRegistry())
	r := &maintenance.Retention{Store: e.store, Age: 168 * time.Hour, Batch: 4, Log: slog.New(slog.DiscardHandler), Deleted: deleted}
	jobs, events, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if jobs != int64(len(doomed)) || events != int64(3*len(doomed)) {
		t.Errorf("got %d jobs and %d events deleted, want %d and %d", jobs, events, len(doomed), 3*len(doomed))
	}
	for _, id := range doomed {
		if n := e.scalar("SELECT count(*) FROM dl_jobs WHERE job_id = $1", id) + e.scalar("SELECT count(*) FROM dl_job_events WHERE job_id = $1", id); n != 0 {
			t.Errorf("job %s: %d rows left, want it and its events gone", id, n)
		}
	}
	for _, id := range kept {
		if n := e.scalar("SELECT count(*) FROM dl_job_events WHERE job_id = $1", id); e.scalar("SELECT count(*) FROM dl_jobs WHERE job_id = $1", id) != 1 || n != 3 {
			t.Errorf("job %s: deleted or lost events (%d left), want it kept whole", id, n)
		}
	}
	if got := counterValue(deleted, "jobs"); got != float64(len(doomed)) {
		t.Errorf("got dataloader_retention_deleted_total{kind=jobs} %v, want %d", got, len(doomed))
	}
	if jobs, _, _ := r.RunOnce(ctx); jobs != 0 {
		t.Errorf("a second pass deleted %d jobs, want 0", jobs)
	}
	if jobs, _, _ := (&maintenance.Retention{Store: e.store, Age: 0}).RunOnce(ctx); jobs != 0 {
		t.Errorf("got %d deleted with age 0 through RunOnce, want 0", jobs)
	}
}

func TestRetentionWithAgeZeroIsDisabled(t *testing.T) {
	t.Parallel()
	r := &maintenance.Retention{Age: 0}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		t.Fatal("Run with Age 0 did not return at once")
	}
}
