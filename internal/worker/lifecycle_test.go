package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/maintenance"
	"github.com/dataloader/dataloader/internal/metrics"
	"github.com/dataloader/dataloader/internal/worker"
)

func TestTriggeredJobIsClaimedHeartbeatedAndSucceeds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	beat := make(chan struct{})
	reg := registry(t, map[string]worker.Task{"t.wait": handler(func(ctx context.Context, run job.Run) error {
		select {
		case <-beat:
		case <-ctx.Done():
			return ctx.Err()
		}
		run.SetResult([]byte(`{"ok":true}`))
		return nil
	})})
	e.startManager(worker.Config{Queues: []worker.QueueConfig{{Name: "q", Concurrency: 2}}, Heartbeat: 100 * time.Millisecond}, reg)

	id := e.trigger(params("q", "t.wait", "k"))
	running := e.waitStatus(id, job.StatusRunning, 5*time.Second)
	first := *running.HeartbeatAt
	deadline := time.Now().Add(5 * time.Second)
	for j := e.get(id); !j.HeartbeatAt.After(first); j = e.get(id) {
		if time.Now().After(deadline) {
			t.Fatalf("heartbeat_at stayed at %v", first)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(beat)
	j := e.waitStatus(id, job.StatusSucceeded, 5*time.Second)
	if j.Attempt != 1 || j.FinishedAt == nil || j.LeaseExpiresAt != nil || string(j.Result) != `{"ok": true}` {
		t.Errorf("got attempt %d finished_at %v lease %v result %s, want 1, set, nil, {\"ok\": true}", j.Attempt, j.FinishedAt, j.LeaseExpiresAt, j.Result)
	}
	got := kinds(e.events(id))
	if got[0] != job.EventQueued || got[1] != job.EventPicked || countKind(e.events(id), job.EventHeartbeat) == 0 || got[len(got)-1] != job.EventDone {
		t.Errorf("got events %v, want queued, picked, heartbeat…, done", got)
	}
}

func TestHeldAdvisoryLockBacksOffWithoutSpendingAnAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// Another process holds the lock_key's advisory lock.
	holder, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(hashtext('shared'))"); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	reg := registry(t, map[string]worker.Task{"t.ok": handler(func(ctx context.Context, run job.Run) error {
		runs.Add(1)
		return nil
	})})
	e.startManager(worker.Config{Queues: []worker.QueueConfig{{Name: "q", Concurrency: 2}}, ClaimBackoff: 300 * time.Millisecond}, reg)
	id := e.trigger(params("q", "t.ok", "shared"))

	deadline := time.Now().Add(5 * time.Second)
	for countKind(e.events(id), job.EventLockConflict) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no lock_conflict event")
		}
		time.Sleep(10 * time.Millisecond)
	}
	j := e.get(id)
	if j.Status != job.StatusQueued && j.Status != job.StatusRunning || runs.Load() != 0 {
		t.Fatalf("after conflict got status %s runs %d, want queued and 0 runs", j.Status, runs.Load())
	}
	if j.Status == job.StatusQueued && j.Attempt != 0 {
		t.Errorf("after conflict got attempt %d, want 0 (no attempt spent)", j.Attempt)
	}
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock(hashtext('shared'))"); err != nil {
		t.Fatal(err)
	}
	j = e.waitStatus(id, job.StatusSucceeded, 10*time.Second)
	if j.Attempt != 1 || runs.Load() != 1 {
		t.Errorf("got attempt %d runs %d, want 1 and 1: waiting on the lock must not spend attempts", j.Attempt, runs.Load())
	}
}

func TestExpiredLeaseGoesBackToQueuedOrLostOnTheLastAttempt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		maxAttempts int
		want        job.Status
		wantEvent   string
	}{
		{"attempts remain", 3, job.StatusQueued, job.EventReaped},
		{"last attempt", 1, job.StatusLost, job.EventLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			p := params("q", "t", "k")
			p.MaxAttempts, p.LeaseTTLSec = &tc.maxAttempts, ptr(1)
			id := e.trigger(p)
			if c, err := e.store.Claim(ctx, "q", "dead-worker", 1); err != nil || len(c) != 1 {
				t.Fatalf("claim: %v %v", c, err)
			}
			reaper := &maintenance.Reaper{Store: e.store, Name: "reaper", Log: testLogger(), Met: metrics.New()}
			if n, _ := reaper.ReapOnce(ctx); n != 0 {
				t.Fatalf("reaped %d jobs with a live lease, want 0", n)
			}
			time.Sleep(1100 * time.Millisecond)
			if n, err := reaper.ReapOnce(ctx); err != nil || n != 1 {
				t.Fatalf("reaped %d (%v), want 1", n, err)
			}
			j := e.get(id)
			if j.Status != tc.want || j.Attempt != 1 || j.LeaseExpiresAt != nil {
				t.Errorf("got status %s attempt %d lease %v, want %s, 1, nil", j.Status, j.Attempt, j.LeaseExpiresAt, tc.want)
			}
			if n := countKind(e.events(id), tc.wantEvent); n != 1 {
				t.Errorf("got %d %s events, want 1", n, tc.wantEvent)
			}
		})
	}
}

func TestFailingJobRunsMaxAttemptsWithBackoffThenFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs atomic.Int32
	step := 300 * time.Millisecond
	reg := registry(t, map[string]worker.Task{"t.fail": {
		Handler: job.HandlerFunc(func(ctx context.Context, run job.Run) error {
			runs.Add(1)
			return errors.New("boom")
		}),
		Retry: job.Linear{Step: step},
	}})
	e.startManager(worker.Config{Queues: []worker.QueueConfig{{Name: "q", Concurrency: 4}}}, reg)
	p := params("q", "t.fail", "k")
	p.MaxAttempts = ptr(3)
	id := e.trigger(p)

	j := e.waitStatus(id, job.StatusFailed, 10*time.Second)
	if runs.Load() != 3 || j.Attempt != 3 || j.Error == nil || *j.Error != "boom" {
		t.Errorf("got runs %d attempt %d error %v, want 3, 3, boom", runs.Load(), j.Attempt, j.Error)
	}
	evs := e.events(id)
	var failed, picked []job.Event
	for _, ev := range evs {
		switch ev.Kind {
		case job.EventFailed:
			failed = append(failed, ev)
		case job.EventPicked:
			picked = append(picked, ev)
		}
	}
	if len(failed) != 3 || len(picked) != 3 {
		t.Fatalf("got %d failed and %d picked events, want 3 and 3: %v", len(failed), len(picked), kinds(evs))
	}
	// The backoff is written as available_at (retry_at in the event), and the
	// next attempt does not start before it: step × attempt.
	for i := 0; i < 2; i++ {
		var payload struct {
			RetryAt time.Time `json:"retry_at"`
			Final   bool      `json:"final"`
		}
		mustUnmarshal(t, failed[i].Payload, &payload)
		wantGap := step * time.Duration(i+1)
		if gap := payload.RetryAt.Sub(failed[i].TS); gap < wantGap-20*time.Millisecond || gap > wantGap+200*time.Millisecond {
			t.Errorf("attempt %d: retry_at is %v after the failure, want ≈ %v", i+1, gap, wantGap)
		}
		if picked[i+1].TS.Before(payload.RetryAt) {
			t.Errorf("attempt %d started at %v, before its retry_at %v", i+2, picked[i+1].TS, payload.RetryAt)
		}
		if payload.Final {
			t.Errorf("attempt %d marked final", i+1)
		}
	}
}

func TestPermanentErrorFailsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs atomic.Int32
	reg := registry(t, map[string]worker.Task{"t.perm": handler(func(ctx context.Context, run job.Run) error {
		runs.Add(1)
		return job.Permanent(errors.New("bad input"))
	})})
	e.startManager(worker.Config{Queues: []worker.QueueConfig{{Name: "q", Concurrency: 1}}}, reg)
	id := e.trigger(params("q", "t.perm", "k"))
	j := e.waitStatus(id, job.StatusFailed, 5*time.Second)
	if runs.Load() != 1 || j.Attempt != 1 {
		t.Errorf("got runs %d attempt %d, want 1 and 1", runs.Load(), j.Attempt)
	}
}

func TestUnknownTaskFailsWithAClearError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startManager(worker.Config{Queues: []worker.QueueConfig{{Name: "q", Concurrency: 1}}}, worker.NewRegistry())
	id := e.trigger(params("q", "no.such.task", "k"))
	j := e.waitStatus(id, job.StatusFailed, 5*time.Second)
	if j.Error == nil || *j.Error != `no handler registered for task "no.such.task" in this worker` {
		t.Errorf("got error %v", j.Error)
	}
}

func TestPanickingHandlerFailsItsAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reg := registry(t, map[string]worker.Task{"t.panic": handler(func(ctx context.Context, run job.Run) error {
		panic("kaboom")
	})})
	e.startManager(worker.Config{Queues: []worker.QueueConfig{{Name: "q", Concurrency: 1}}}, reg)
	p := params("q", "t.panic", "k")
	p.MaxAttempts = ptr(1)
	j := e.waitStatus(e.trigger(p), job.StatusFailed, 5*time.Second)
	if j.Error == nil || *j.Error != "handler panicked: kaboom" {
		t.Errorf("got error %v, want handler panicked: kaboom", j.Error)
	}
}

func ptr[T any](v T) *T { return &v }
