package worker

import (
	"context"
	"errors"
	"time"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
)

// maxFinishBatch bounds one finish statement; its dl_job_done notification
// names every finished job and must stay under PostgreSQL's 8000-byte payload.
const maxFinishBatch = 200

// complete records outcomes in batches: it blocks for one finished handler,
// takes whatever else finished meanwhile, and writes them in one statement.
// No timer delays a lone job; batches grow by themselves under load while the
// previous statement runs. It exits once stop is closed and nothing is left.
func (m *Manager) complete() {
	ctx := context.Background()
	batch := make([]*execution, 0, maxFinishBatch)
	for {
		batch = batch[:0]
		select {
		case e := <-m.done:
			batch = append(batch, e)
		case <-m.stop:
			select {
			case e := <-m.done:
				batch = append(batch, e)
			default:
				return
			}
		}
	fill:
		for len(batch) < maxFinishBatch {
			select {
			case e := <-m.done:
				batch = append(batch, e)
			default:
				break fill
			}
		}
		m.finish(ctx, batch)
	}
}

func (m *Manager) finish(ctx context.Context, batch []*execution) {
	var fs []store.Finish
	var requeue []store.Attempt
	var owned []*execution
	m.mu.Lock()
	for _, e := range batch {
		if m.running[e.claimed.ID] == e { // not handed back meanwhile
			owned = append(owned, e)
		}
	}
	m.mu.Unlock()
	for _, e := range owned {
		e.mu.Lock()
		lockLost := e.lockLost
		e.mu.Unlock()
		cause := context.Cause(e.ctx)
		switch {
		case errors.Is(cause, job.ErrLeaseLost):
			// Reaped or taken over: the fenced write would match nothing.
			continue
		case errors.Is(cause, job.ErrShutdown):
			// Handed back at shutdown: the hand-back recorded it.
			continue
		case lockLost:
			requeue = append(requeue, e.attempt())
			continue
		}
		fs = append(fs, m.outcome(e, cause))
	}
	// The locks go before the outcome is written: while the row still says
	// running no claim takes the key's next job, and once the finish commits
	// (and wakes other replicas) the lock is already free, so the next job
	// never meets a stale lock and backs off out of order.
	keys := make([]string, len(owned))
	for i, e := range owned {
		keys[i] = e.claimed.LockKey
	}
	m.locks.release(ctx, keys)
	if len(fs) > 0 {
		start := time.Now()
		done, err := m.retryWrite(ctx, "finish", func(wctx context.Context) ([]store.Finished, error) {
			return m.store.FinishMany(wctx, m.cfg.WorkerID, fs)
		})
		m.met.FinishSeconds.Observe(time.Since(start).Seconds())
		if err == nil {
			m.stats.finished.Add(int64(len(done)))
			for _, f := range done {
				outcome := string(f.Status)
				if f.Status == job.StatusQueued {
					outcome = "retry"
					m.met.Retries.WithLabelValues(f.Queue).Inc()
				}
				m.met.Completed.WithLabelValues(f.Queue, outcome).Inc()
			}
		}
	}
	if len(requeue) > 0 {
		if _, err := m.store.Requeue(ctx, m.cfg.WorkerID, requeue, 0, store.ReasonLockLost); err != nil {
			m.log.Error("requeue after lost lock failed", "jobs", len(requeue), "error", err)
		}
	}
	m.forget(ctx, owned, false)
}

// outcome maps a handler's return and its context's cause to the write.
func (m *Manager) outcome(e *execution, cause error) store.Finish {
	e.mu.Lock()
	f := store.Finish{Attempt: e.attempt(), Result: e.result, Progress: e.progress}
	err := e.err
	e.mu.Unlock()
	switch {
	case err == nil:
		f.Outcome = store.OutcomeSucceeded
	case errors.Is(cause, job.ErrCanceled):
		f.Outcome, f.Error = store.OutcomeCanceled, "canceled: "+err.Error()
	case job.IsPermanent(err):
		f.Outcome, f.Error = store.OutcomeFailed, err.Error()
	default:
		policy := e.task.Retry
		if policy == nil {
			policy = job.DefaultRetry
		}
		f.Outcome, f.Error, f.Backoff = store.OutcomeRetry, err.Error(), policy.Backoff(e.claimed.Attempt)
		if d, ok := job.RetryDelay(err); ok { // the handler knows this failure's delay (e.g. Retry-After)
			f.Backoff = d
		}
	}
	return f
}

// retryWrite runs a finishing write on its own deadline, retrying transient
// failures (a dropped connection, a database restart) with backoff. The
// write is fenced on the attempt, so a retry after an unseen commit is a
// harmless no-op.
func (m *Manager) retryWrite(ctx context.Context, what string, fn func(context.Context) ([]store.Finished, error)) ([]store.Finished, error) {
	delay := 100 * time.Millisecond
	var err error
	for try := 0; try < 8; try++ {
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		var out []store.Finished
		out, err = fn(wctx)
		cancel()
		if err == nil {
			return out, nil
		}
		m.log.Warn("write failed; retrying", "what", what, "error", err, "retry_in", delay)
		time.Sleep(delay)
		delay = min(delay*2, 5*time.Second)
	}
	m.log.Error("write failed; the reaper will return these jobs after their lease", "what", what, "error", err)
	return nil, err
}
