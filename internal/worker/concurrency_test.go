package worker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/internal/worker"
)

// keyWatch records, per lock_key, how many handlers run at once, and how
// often each job ran.
type keyWatch struct {
	mu       sync.Mutex
	running  map[string]int
	overlaps []string
	runs     map[uuid.UUID]int
	order    []uuid.UUID
}

func newKeyWatch() *keyWatch {
	return &keyWatch{running: map[string]int{}, runs: map[uuid.UUID]int{}}
}

func (w *keyWatch) task(hold time.Duration) worker.Task {
	return handler(func(ctx context.Context, run job.Run) error {
		c := run.Job()
		w.mu.Lock()
		w.running[c.LockKey]++
		if w.running[c.LockKey] > 1 {
			w.overlaps = append(w.overlaps, c.LockKey)
		}
		w.runs[c.ID]++
		w.order = append(w.order, c.ID)
		w.mu.Unlock()
		time.Sleep(hold)
		w.mu.Lock()
		w.running[c.LockKey]--
		w.mu.Unlock()
		return nil
	})
}

func TestEightWorkersRunEachJobOnceAndNeverOverlapALockKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := newKeyWatch()
	reg := registry(t, map[string]worker.Task{"t.watch": w.task(time.Millisecond)})
	jobs := make([]store.NewJob, 1000)
	for i := range jobs {
		jobs[i] = store.NewJob{Queue: "q", Task: "t.watch", LockKey: fmt.Sprintf("key-%d", i%25)}
	}
	ids, err := e.store.TriggerMany(context.Background(), jobs, 60)
	if err != nil || len(ids) != 1000 {
		t.Fatalf("insert: %d %v", len(ids), err)
	}
	for i := 0; i < 8; i++ {
		e.startManager(worker.Config{Queues: []worker.QueueConfig{{Name: "q", Concurrency: 4}}}, reg)
	}
	deadline := time.Now().Add(60 * time.Second)
	for e.scalar(`SELECT count(*) FROM dl_jobs WHERE status = 'succeeded'`) < 1000 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 1000 jobs succeeded", e.scalar(`SELECT count(*) FROM dl_jobs WHERE status = 'succeeded'`))
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.overlaps) > 0 {
		t.Errorf("lock_keys ran concurrently %d times: %v", len(w.overlaps), w.overlaps[:min(5, len(w.overlaps))])
	}
	for _, id := range ids {
		if w.runs[id] != 1 {
			t.Errorf("job %s ran %d times, want 1", id, w.runs[id])
		}
	}
	if n := e.scalar(`SELECT count(*) FROM dl_jobs WHERE attempt <> 1`); n != 0 {
		t.Errorf("%d jobs have attempt != 1: waiting on a key must not spend attempts", n)
	}
}

func TestJobsOfOneLockKeyStartOneAtATimeInPriorityThenEnqueueOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := newKeyWatch()
	reg := registry(t, map[string]worker.Task{"t.watch": w.task(20 * time.Millisecond)})
	var want []uuid.UUID
	var urgent uuid.UUID
	for i := 0; i < 10; i++ {
		p := params("q", "t.watch", "serial")
		if i == 6 {
			p.Priority = ptr(10) // lower runs first: this one overtakes the rest
		}
		id := e.trigger(p)
		if i == 6 {
			urgent = id
		} else {
			want = append(want, id)
		}
	}
	want = append([]uuid.UUID{urgent}, want...)
	// Several workers free in two processes.
	e.startManager(worker.Config{Queues: []worker.QueueConfig{{Name: "q", Concurrency: 5}}}, reg)
	e.startManager(worker.Config{Queues: []worker.QueueConfig{{Name: "q", Concurrency: 5}}}, reg)
	for _, id := range want {
		e.waitStatus(id, job.StatusSucceeded, 20*time.Second)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.overlaps) > 0 {
		t.Errorf("jobs of one key overlapped %d times", len(w.overlaps))
	}
	for i := range want {
		if w.order[i] != want[i] {
			t.Fatalf("start order differs at %d: got %v, want %v", i, w.order, want)
		}
	}
	if n := e.scalar(`SELECT count(*) FROM dl_jobs WHERE attempt <> 1`); n != 0 {
		t.Errorf("%d jobs spent more than one attempt", n)
	}
	if n := e.scalar(`SELECT count(*) FROM dl_job_events WHERE kind = 'lock_conflict'`); n != 0 {
		t.Errorf("%d lock conflicts: the claim should not pick a busy key", n)
	}
}
