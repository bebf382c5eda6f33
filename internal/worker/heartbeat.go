package worker

import (
	"context"
	"encoding/json"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
)

// heartbeat extends the leases of every running job in one statement per
// tick, stops handlers whose job is no longer theirs, catches cancellations
// whose notification was missed, checks the lock session, and keeps the
// process's row in the worker registry fresh.
func (m *Manager) heartbeat(ctx context.Context) {
	t := time.NewTicker(m.cfg.Heartbeat)
	defer t.Stop()
	m.registerWorker(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.beat:
		}
		m.beatOnce(ctx)
		m.registerWorker(ctx)
	}
}

func (m *Manager) beatOnce(ctx context.Context) {
	if lost := m.locks.check(ctx); len(lost) > 0 {
		m.dropLostLocks(lost)
	}
	m.mu.Lock()
	execs := make(map[store.Attempt]*execution, len(m.running))
	atts := make([]store.Attempt, 0, len(m.running))
	for _, e := range m.running {
		if e.returned {
			// Its outcome is being written; the finish would race the
			// heartbeat and a "not held" answer would mean nothing.
			continue
		}
		execs[e.attempt()] = e
		atts = append(atts, e.attempt())
	}
	m.mu.Unlock()
	if len(atts) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, m.cfg.Heartbeat)
	res, err := m.store.Heartbeat(wctx, m.cfg.WorkerID, atts)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("heartbeat failed; retrying next tick", "jobs", len(atts), "error", err)
		}
		return
	}
	held := make(map[uuid.UUID]bool, len(res))
	cancelled := make(map[uuid.UUID]bool)
	for _, r := range res {
		held[r.JobID] = true
		cancelled[r.JobID] = r.CancelRequested
	}
	for a, e := range execs {
		if held[a.JobID] {
			if cancelled[a.JobID] {
				e.cancel(job.ErrCanceled)
			}
			continue
		}
		m.mu.Lock()
		finishing := e.returned || m.running[a.JobID] != e
		m.mu.Unlock()
		if finishing {
			continue // it returned meanwhile and its own outcome was written
		}
		m.log.Warn("job no longer held by this worker; stopping its handler", "job_id", a.JobID, "attempt", a.Attempt)
		e.cancel(job.ErrLeaseLost)
	}
}

// dropLostLocks stops the jobs whose advisory lock was lost with the lock
// session and could not be re-taken: they go back to the queue uncharged.
func (m *Manager) dropLostLocks(keys []string) {
	lost := make(map[string]bool, len(keys))
	for _, k := range keys {
		lost[k] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.running {
		if lost[e.claimed.LockKey] {
			e.mu.Lock()
			e.lockLost = true
			e.mu.Unlock()
			e.cancel(job.ErrLeaseLost)
		}
	}
}

func (m *Manager) registerWorker(ctx context.Context) {
	host, _ := os.Hostname()
	queues := make([]map[string]any, 0, len(m.cfg.Queues))
	for _, q := range m.cfg.Queues {
		queues = append(queues, map[string]any{"queue": q.Name, "concurrency": q.Concurrency})
	}
	qs, _ := json.Marshal(queues)
	var until *time.Time
	if d := m.drainDeadline.Load(); d != nil {
		until = d
	}
	err := m.store.UpsertWorker(ctx, store.WorkerInfo{WorkerID: m.cfg.WorkerID, Host: host, PID: os.Getpid(),
		Version: m.cfg.Version, Queues: qs, Running: m.Running(), Draining: m.Draining(), DrainUntil: until})
	if err != nil && ctx.Err() == nil {
		m.log.Warn("worker registry update failed", "error", err)
	}
}

// flushProgressLoop writes buffered progress of all running jobs in one
// statement every ProgressInterval.
func (m *Manager) flushProgressLoop(ctx context.Context) {
	t := time.NewTicker(m.cfg.ProgressInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.flushProgress(ctx)
		}
	}
}

func (m *Manager) flushProgress(ctx context.Context) {
	m.mu.Lock()
	var ups []store.ProgressUpdate
	for _, e := range m.running {
		if e.returned {
			continue // its last progress goes with its outcome
		}
		if p, ok := e.takeProgress(); ok {
			ups = append(ups, store.ProgressUpdate{Attempt: e.attempt(), Progress: p})
		}
	}
	m.mu.Unlock()
	if len(ups) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := m.store.SaveProgress(wctx, m.cfg.WorkerID, ups); err != nil {
		m.log.Warn("progress write failed", "jobs", len(ups), "error", err)
	}
}
