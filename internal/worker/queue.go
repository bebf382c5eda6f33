package worker

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
)

// queueLoop is the claim loop of one queue. active counts its handlers
// running; pending counts handlers that returned and whose outcome is not
// committed yet (both guarded by Manager.mu). A slot frees when the handler
// returns, not when its outcome commits, so bookkeeping never holds slots
// that could work; pending beyond the concurrency stops claiming, so a slow
// database still pushes back.
type queueLoop struct {
	name        string
	concurrency int
	wake        chan struct{}
	active      int
	pending     int
}

// free returns how many jobs the loop may claim now. Called with mu held.
func (q *queueLoop) free() int {
	if q.pending >= q.concurrency {
		return 0
	}
	return q.concurrency - q.active
}

// poke wakes the loop without blocking; wake-ups coalesce.
func (q *queueLoop) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// runQueue claims whenever the queue may have ready jobs and slots are free:
// on a notification, when a slot frees up, when the next delayed job becomes
// due, and every PollInterval as the safety net.
func (m *Manager) runQueue(ctx context.Context, q *queueLoop) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		next := m.claimAvailable(ctx, q)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		case <-timer.C:
		}
	}
}

// claimAvailable claims into the free slots until the queue has no more
// ready jobs, and returns how long to sleep before polling again.
func (m *Manager) claimAvailable(ctx context.Context, q *queueLoop) time.Duration {
	for ctx.Err() == nil {
		m.mu.Lock()
		free := q.free()
		m.mu.Unlock()
		if free <= 0 {
			return m.cfg.PollInterval
		}
		want := min(free, m.cfg.MaxClaim)
		// The claim commits on its own deadline, not ctx's: cancelling it
		// mid-flight could leave claimed rows that we never learn about.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		start := time.Now()
		claimed, err := m.store.Claim(cctx, q.name, m.cfg.WorkerID, want)
		cancel()
		m.met.ClaimSeconds.WithLabelValues(q.name).Observe(time.Since(start).Seconds())
		if err != nil {
			m.log.Error("claim failed", "queue", q.name, "error", err)
			return time.Second
		}
		m.dispatch(ctx, q, claimed)
		if len(claimed) < want {
			return m.untilNextDue(ctx, q)
		}
	}
	return m.cfg.PollInterval
}

// untilNextDue returns the sleep until the queue's next delayed job is due,
// bounded by the poll interval. Ready jobs that wait on a busy lock_key are
// woken by the finish of the job that holds it, not by this timer.
func (m *Manager) untilNextDue(ctx context.Context, q *queueLoop) time.Duration {
	at, ok, err := m.store.NextAvailable(ctx, q.name)
	if err != nil || !ok {
		return m.cfg.PollInterval
	}
	if d := time.Until(at); d > 0 && d < m.cfg.PollInterval {
		return d + time.Millisecond
	}
	return m.cfg.PollInterval
}

// dispatch takes the advisory locks of freshly claimed jobs, hands back those
// whose lock is held elsewhere, and starts a handler for the others.
func (m *Manager) dispatch(ctx context.Context, q *queueLoop, claimed []job.Claimed) {
	if len(claimed) == 0 {
		return
	}
	m.met.Claimed.WithLabelValues(q.name).Add(float64(len(claimed)))
	keys := make([]string, len(claimed))
	for i, c := range claimed {
		keys[i] = c.LockKey
	}
	bg := context.WithoutCancel(ctx)
	got := m.locks.acquire(bg, keys)
	var conflicts []store.Attempt
	for i, c := range claimed {
		if !got[i] {
			conflicts = append(conflicts, store.Attempt{JobID: c.ID, Attempt: c.Attempt})
			continue
		}
		m.start(q, c)
	}
	if len(conflicts) > 0 {
		m.met.LockConflicts.WithLabelValues(q.name).Add(float64(len(conflicts)))
		if _, err := m.store.Requeue(bg, m.cfg.WorkerID, conflicts, m.cfg.ClaimBackoff, store.ReasonLockConflict); err != nil {
			m.log.Error("requeue after lock conflict failed; the reaper will return these jobs", "jobs", len(conflicts), "error", err)
		}
	}
}

func (m *Manager) start(q *queueLoop, c job.Claimed) {
	task, known := m.registry.Lookup(c.Task)
	ctx, cancel := context.WithCancelCause(context.Background())
	e := &execution{claimed: c, mgr: m, queue: q, task: task, known: known, ctx: ctx, cancel: cancel, started: time.Now()}
	m.mu.Lock()
	m.running[c.ID] = e
	q.active++
	m.mu.Unlock()
	m.met.Running.WithLabelValues(q.name).Inc()
	m.met.StartLatency.WithLabelValues(q.name).Observe(max(0, e.started.Sub(c.AvailableAt).Seconds()))
	go m.execute(e)
}

// execute runs the handler and passes the execution to the completer. A
// panicking handler fails its attempt like an error would.
func (m *Manager) execute(e *execution) {
	defer func() {
		if r := recover(); r != nil {
			m.log.Error("handler panicked", "job_id", e.claimed.ID, "task", e.claimed.Task, "panic", r, "stack", string(debug.Stack()))
			e.err = fmt.Errorf("handler panicked: %v", r)
		}
		m.met.ProcessSeconds.WithLabelValues(e.queue.name, e.claimed.Task).Observe(time.Since(e.started).Seconds())
		m.mu.Lock()
		if m.running[e.claimed.ID] == e {
			e.returned = true
			e.queue.active--
			e.queue.pending++
		}
		m.mu.Unlock()
		e.queue.poke()
		select {
		case m.done <- e:
		case <-m.stop:
		}
	}()
	if !e.known {
		e.err = job.Permanent(fmt.Errorf("no handler registered for task %q in this worker", e.claimed.Task))
		return
	}
	e.err = e.task.Handler.Work(e.ctx, e)
}
