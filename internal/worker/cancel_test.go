package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/internal/worker"
)

func TestCancelOfRunningJobCancelsItsContextWithinASecondKeepingProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cause := make(chan error, 1)
	reg := registry(t, map[string]worker.Task{"t.long": handler(func(ctx context.Context, run job.Run) error {
		run.Progress(job.Progress{Done: 3, Total: 10, Unit: "chunks"})
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})})
	// Heartbeats are slow: the cancel must be pushed, not found at a tick.
	e.startManager(worker.Config{Queues: []worker.QueueConfig{{Name: "q", Concurrency: 1}}, Heartbeat: 30 * time.Second,
		ProgressInterval: 50 * time.Millisecond}, reg)
	id := e.trigger(params("q", "t.long", "k"))
	e.waitStatus(id, job.StatusRunning, 5*time.Second)
	time.Sleep(200 * time.Millisecond) // let progress be written

	start := time.Now()
	if _, err := e.store.Cancel(context.Background(), id, "test"); err != nil {
		t.Fatal(err)
	}
	j := e.waitStatus(id, job.StatusCanceled, time.Second)
	if took := time.Since(start); took > time.Second {
		t.Errorf("canceled after %v, want within 1 s", took)
	}
	if got := <-cause; !errors.Is(got, job.ErrCanceled) {
		t.Errorf("got context cause %v, want %v", got, job.ErrCanceled)
	}
	var p job.Progress
	mustUnmarshal(t, j.Progress, &p)
	if p.Done != 3 || p.Total != 10 {
		t.Errorf("got progress %+v, want done 3 of 10 kept", p)
	}
	if got := kinds(e.events(id)); countKind(e.events(id), job.EventCancelRequested) != 1 || got[len(got)-1] != job.EventCanceled {
		t.Errorf("got events %v, want cancel_requested … canceled", got)
	}
}

func TestCancelOfQueuedJobIsImmediate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.trigger(params("nobody-works-this", "t", "k"))
	j, err := e.store.Cancel(context.Background(), id, "test")
	if err != nil || j.Status != job.StatusCanceled || j.FinishedAt == nil {
		t.Fatalf("got %s finished_at %v err %v, want canceled at once", j.Status, j.FinishedAt, err)
	}
	if _, err := e.store.Claim(context.Background(), "nobody-works-this", "w", 10); err != nil {
		t.Fatal(err)
	}
	if got := e.get(id).Status; got != job.StatusCanceled {
		t.Errorf("a canceled job was claimed: status %s", got)
	}
}

func TestReapedAndTakenOverAttemptCannotOverwriteTheNewOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	release := make(chan struct{})
	stopped := make(chan error, 1)
	reg := registry(t, map[string]worker.Task{"t.slow": handler(func(ctx context.Context, run job.Run) error {
		select {
		case <-release:
		case <-ctx.Done():
			stopped <- context.Cause(ctx)
			<-release
		}
		return errors.New("late failure of the old attempt")
	})})
	e.startManager(worker.Config{WorkerID: "old", Queues: []worker.QueueConfig{{Name: "q", Concurrency: 1}},
		Heartbeat: 200 * time.Millisecond}, reg)
	p := params("q", "t.slow", "k")
	id := e.trigger(p)
	e.waitStatus(id, job.StatusRunning, 5*time.Second)

	// The lease of attempt 1 is taken away (as the reaper would after a
	// stall), and another worker claims and finishes attempt 2.
	if _, err := e.pool.Exec(ctx, `UPDATE dl_jobs SET status = 'queued', lease_expires_at = NULL WHERE job_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE dl_queues SET paused = true`); err != nil {
		t.Fatal(err)
	}
	claimed, err := e.store.Claim(ctx, "q", "new", 1)
	if err != nil || len(claimed) != 1 || claimed[0].Attempt != 2 {
		t.Fatalf("takeover claim: %+v %v", claimed, err)
	}
	if _, err := e.store.FinishMany(ctx, "new", []store.Finish{{Attempt: store.Attempt{JobID: id, Attempt: 2},
		Outcome: store.OutcomeSucceeded, Result: []byte(`{"by":"new"}`)}}); err != nil {
		t.Fatal(err)
	}
	// The old worker's heartbeat finds the job gone and stops its handler.
	select {
	case got := <-stopped:
		if !errors.Is(got, job.ErrLeaseLost) {
			t.Errorf("old handler stopped with %v, want %v", got, job.ErrLeaseLost)
		}
	case <-time.After(5 * time.Second):
		t.Error("old handler was not stopped after losing its job")
	}
	close(release)
	time.Sleep(300 * time.Millisecond)
	j := e.get(id)
	if j.Status != job.StatusSucceeded || j.Attempt != 2 || string(j.Result) != `{"by": "new"}` || j.Error != nil {
		t.Errorf("got status %s attempt %d result %s error %v, want the new attempt's success", j.Status, j.Attempt, j.Result, j.Error)
	}
	// A direct late write of attempt 1 is fenced out too.
	done, err := e.store.FinishMany(ctx, "old", []store.Finish{{Attempt: store.Attempt{JobID: id, Attempt: 1}, Outcome: store.OutcomeFailed, Error: "late"}})
	if err != nil || len(done) != 0 {
		t.Errorf("late finish of attempt 1 matched %d rows (%v), want 0", len(done), err)
	}
}
