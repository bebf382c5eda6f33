package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/worker"
)

func TestProgressIsThrottledAndItsLastValueIsNeverLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 3000
	reg := registry(t, map[string]worker.Task{"t.progress": handler(func(ctx context.Context, run job.Run) error {
		for i := 1; i <= n; i++ {
			run.Progress(job.Progress{Done: int64(i), Total: n, Unit: "rows", Stage: "loading"})
			if i%1000 == 0 && i < n {
				time.Sleep(300 * time.Millisecond)
			}
		}
		return nil // returns right after the last report, before any flush
	})})
	e.startManager(worker.Config{Queues: []worker.QueueConfig{{Name: "q", Concurrency: 1}}}, reg)
	id := e.trigger(params("q", "t.progress", "k"))
	j := e.waitStatus(id, job.StatusSucceeded, 10*time.Second)
	var p job.Progress
	mustUnmarshal(t, j.Progress, &p)
	if p.Done != n || p.Total != n || p.Stage != "loading" {
		t.Errorf("got stored progress %+v, want the last report (done %d)", p, n)
	}
	// 3000 reports over ~0.6 s at the default 500 ms flush: a few writes.
	if got := countKind(e.events(id), job.EventProgress); got > 4 {
		t.Errorf("got %d progress writes for %d reports, want at most 4 (throttled)", got, n)
	}
}

func TestCheckpointIsDurableAtOnceAndReadByTheNextAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	saved := make(chan struct{})
	proceed := make(chan struct{})
	seen := make(chan json.RawMessage, 2)
	reg := registry(t, map[string]worker.Task{"t.resume": {Retry: job.Linear{Step: 10 * time.Millisecond},
		Handler: job.HandlerFunc(func(ctx context.Context, run job.Run) error {
			seen <- run.Job().Checkpoint
			if run.Job().Attempt > 1 {
				return nil
			}
			if err := run.Checkpoint(ctx, map[string]int{"chunk": 3}); err != nil {
				return err
			}
			close(saved)
			<-proceed
			return errors.New("attempt 1 fails after its checkpoint")
		})}})
	e.startManager(worker.Config{Queues: []worker.QueueConfig{{Name: "q", Concurrency: 1}}}, reg)
	id := e.trigger(params("q", "t.resume", "k"))
	<-saved
	// Written at once, while the attempt still runs (not with the outcome).
	if got := e.scalar("SELECT (checkpoint->>'chunk')::int FROM dl_jobs WHERE job_id = $1 AND status = 'running'", id); got != 3 {
		t.Errorf("got checkpoint chunk %d while running, want 3", got)
	}
	close(proceed)
	j := e.waitStatus(id, job.StatusSucceeded, 10*time.Second)
	if first, second := <-seen, <-seen; first != nil || string(second) != `{"chunk": 3}` {
		t.Errorf("got checkpoints %s then %s, want none then {\"chunk\": 3}", first, second)
	}
	if j.Attempt != 2 {
		t.Errorf("got attempt %d, want 2", j.Attempt)
	}
}

func TestCheckpointAndEventsAreFencedOnTheAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	running := make(chan struct{})
	stolen := make(chan struct{})
	errs := make(chan error, 3)
	reg := registry(t, map[string]worker.Task{"t.fenced": handler(func(ctx context.Context, run job.Run) error {
		errs <- run.Event(ctx, "delivery_attempt", map[string]int{"status": 503})
		close(running)
		<-stolen
		bg := context.Background()
		errs <- run.Checkpoint(bg, map[string]int{"chunk": 9})
		errs <- run.Event(bg, "delivery_attempt", map[string]int{"status": 200})
		<-ctx.Done()
		return context.Cause(ctx)
	})})
	e.startManager(worker.Config{Queues: []worker.QueueConfig{{Name: "q", Concurrency: 1}}, Heartbeat: 200 * time.Millisecond}, reg)
	id := e.trigger(params("q", "t.fenced", "k"))
	<-running
	if err := <-errs; err != nil {
		t.Fatalf("event of the held attempt: got %v, want nil", err)
	}
	// Another worker took the job over.
	e.scalar("WITH u AS (UPDATE dl_jobs SET worker_id = 'thief', attempt = attempt + 1 WHERE job_id = $1 RETURNING 1) SELECT count(*) FROM u", id)
	close(stolen)
	for _, what := range []string{"checkpoint", "event"} {
		if err := <-errs; !errors.Is(err, job.ErrLeaseLost) {
			t.Errorf("%s after takeover: got %v, want %v", what, err, job.ErrLeaseLost)
		}
	}
	if got := e.scalar("SELECT count(*) FROM dl_jobs WHERE job_id = $1 AND checkpoint IS NOT NULL", id); got != 0 {
		t.Errorf("a stale attempt wrote a checkpoint")
	}
	if got := countKind(e.events(id), "delivery_attempt"); got != 1 {
		t.Errorf("got %d delivery_attempt events, want 1 (the stale one fenced out)", got)
	}
}

func TestRetryAfterSetsThisFailuresDelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	starts := make(chan time.Time, 2)
	reg := registry(t, map[string]worker.Task{"t.later": {Retry: job.Linear{Step: 10 * time.Millisecond},
		Handler: job.HandlerFunc(func(ctx context.Context, run job.Run) error {
			starts <- time.Now()
			if run.Job().Attempt == 1 {
				return job.RetryAfter(errors.New("busy, come back later"), 1500*time.Millisecond)
			}
			return nil
		})}})
	e.startManager(worker.Config{Queues: []worker.QueueConfig{{Name: "q", Concurrency: 1}}}, reg)
	id := e.trigger(params("q", "t.later", "k"))
	e.waitStatus(id, job.StatusSucceeded, 10*time.Second)
	first, second := <-starts, <-starts
	if gap := second.Sub(first); gap < 1500*time.Millisecond || gap > 4*time.Second {
		t.Errorf("got %v between attempts, want the 1.5 s the handler asked for (not the policy's 10 ms)", gap)
	}
}
