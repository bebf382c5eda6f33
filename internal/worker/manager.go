package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/metrics"
	"github.com/dataloader/dataloader/internal/notify"
	"github.com/dataloader/dataloader/internal/store"
)

// QueueConfig is one entry of WORKERS_JSON.
type QueueConfig struct {
	Name        string
	Concurrency int
}

// Config tunes a Manager. Zero durations take the documented defaults.
type Config struct {
	WorkerID         string        // unique per process; default host-pid-random
	Queues           []QueueConfig // the queues this process works
	Heartbeat        time.Duration // lease extension period (DL_HEARTBEAT_SEC), default 10 s
	ClaimBackoff     time.Duration // delay after a lock conflict (DL_CLAIM_BACKOFF_SEC), default 15 s
	PollInterval     time.Duration // safety-net poll when no notification comes, default 2 s
	ShutdownGrace    time.Duration // time running jobs get to finish on shutdown
	ProgressInterval time.Duration // how often buffered progress is written, default 500 ms
	MaxClaim         int           // jobs per claim statement at most, default 100
	Version          string
}

func (c *Config) setDefaults() {
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 10 * time.Second
	}
	if c.ClaimBackoff <= 0 {
		c.ClaimBackoff = 15 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 2 * time.Second
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = 500 * time.Millisecond
	}
	if c.MaxClaim <= 0 {
		c.MaxClaim = 100
	}
}

// Manager runs the worker loops of one process.
type Manager struct {
	cfg      Config
	dsn      string
	store    *store.Store
	listener *notify.Listener
	registry *Registry
	log      *slog.Logger
	met      *metrics.Metrics

	locks *lockSet
	done  chan *execution // finished handlers → completer
	stop  chan struct{}   // closed when the completer may exit
	beat  chan struct{}   // asks the heartbeater for an immediate tick

	mu            sync.Mutex
	running       map[uuid.UUID]*execution
	queues        map[string]*queueLoop
	draining      atomic.Bool
	drainDeadline atomic.Pointer[time.Time]
	stats         struct{ finished, handedBack atomic.Int64 }
}

// New builds a Manager. dsn is used for the dedicated lock session.
func New(cfg Config, dsn string, st *store.Store, l *notify.Listener, reg *Registry, log *slog.Logger, met *metrics.Metrics) *Manager {
	cfg.setDefaults()
	m := &Manager{cfg: cfg, dsn: dsn, store: st, listener: l, registry: reg, log: log, met: met,
		done: make(chan *execution, 4096), stop: make(chan struct{}), beat: make(chan struct{}, 1),
		running: map[uuid.UUID]*execution{}, queues: map[string]*queueLoop{}}
	for _, q := range cfg.Queues {
		m.queues[q.Name] = &queueLoop{name: q.Name, concurrency: q.Concurrency, wake: make(chan struct{}, 1)}
		// Series exist from the start, so dashboards and alerts see zeros.
		met.Claimed.WithLabelValues(q.Name)
		met.LockConflicts.WithLabelValues(q.Name)
		met.Running.WithLabelValues(q.Name)
	}
	return m
}

// WorkerID is this process's id, recorded on the jobs it claims.
func (m *Manager) WorkerID() string { return m.cfg.WorkerID }

// Draining reports whether the manager stopped claiming for shutdown.
func (m *Manager) Draining() bool { return m.draining.Load() }

// Running returns how many jobs run in this process now.
func (m *Manager) Running() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.running)
}

// Run works the configured queues until ctx ends, then shuts down in order:
// stop claiming, give running jobs the grace period, hand the rest back in
// one statement, record every outcome, release locks. It returns nil after a
// clean shutdown.
func (m *Manager) Run(ctx context.Context) error {
	bg := context.WithoutCancel(ctx)
	locks, err := openLockSet(bg, m.dsn, m.log)
	if err != nil {
		return err
	}
	m.locks = locks
	defer locks.close(bg)

	var jobsSub, cancelSub *notify.Subscription
	if m.listener != nil {
		jobsSub = m.listener.Subscribe(notify.ChannelJobs, 1024)
		cancelSub = m.listener.Subscribe(notify.ChannelCancel, 1024)
		defer jobsSub.Close()
		defer cancelSub.Close()
	}

	var bgWG, loopWG sync.WaitGroup
	bgCtx, stopBG := context.WithCancel(bg)
	defer stopBG()
	bgWG.Add(3)
	go func() { defer bgWG.Done(); m.complete() }()
	go func() { defer bgWG.Done(); m.heartbeat(bgCtx) }()
	go func() { defer bgWG.Done(); m.flushProgressLoop(bgCtx) }()
	if m.listener != nil {
		bgWG.Add(1)
		go func() { defer bgWG.Done(); m.route(bgCtx, jobsSub, cancelSub) }()
	}
	for _, q := range m.queues {
		loopWG.Add(1)
		go func() { defer loopWG.Done(); m.runQueue(ctx, q) }()
	}
	m.log.Info("workers started", "worker_id", m.cfg.WorkerID, "queues", len(m.queues))

	<-ctx.Done()
	deadline := time.Now().Add(m.cfg.ShutdownGrace)
	m.drainDeadline.Store(&deadline)
	m.draining.Store(true)
	m.registerWorker(bg) // the workers page shows the drain and its countdown at once
	loopWG.Wait()
	m.drain(bg)
	close(m.stop)
	stopBG()
	bgWG.Wait()
	m.flushProgress(bg)
	if err := m.store.DeleteWorker(bg, m.cfg.WorkerID); err != nil {
		m.log.Warn("could not remove worker row", "error", err)
	}
	m.log.Info("workers stopped", "finished", m.stats.finished.Load(), "handed_back", m.stats.handedBack.Load())
	return nil
}

// drain waits for running jobs up to the grace period, then hands the rest
// back to the queue without charging their attempt.
func (m *Manager) drain(ctx context.Context) {
	running := m.Running()
	m.log.Info("draining: claiming stopped", "in_flight", running, "finish_buffer", len(m.done), "grace", m.cfg.ShutdownGrace)
	deadline := time.NewTimer(m.cfg.ShutdownGrace)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for m.Running() > 0 {
		select {
		case <-deadline.C:
			m.handBack(ctx)
			return
		case <-tick.C:
		}
	}
	m.met.Shutdowns.WithLabelValues("graceful").Inc()
}

func (m *Manager) handBack(ctx context.Context) {
	m.mu.Lock()
	rest := make([]*execution, 0, len(m.running))
	for _, e := range m.running {
		if !e.returned { // returned ones belong to the completer, which records them
			rest = append(rest, e)
		}
	}
	m.mu.Unlock()
	atts := make([]store.Attempt, len(rest))
	keys := make([]string, len(rest))
	for i, e := range rest {
		atts[i], keys[i] = e.attempt(), e.claimed.LockKey
	}
	// Locks first: the hand-back wakes other replicas, which must find the
	// keys free instead of backing off on our stale locks.
	m.locks.release(ctx, keys)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ids, err := m.store.Requeue(wctx, m.cfg.WorkerID, atts, 0, store.ReasonShutdown)
	if err != nil {
		m.log.Error("hand back at shutdown failed; the reaper will return these jobs after their lease", "jobs", len(atts), "error", err)
	}
	m.met.Shutdowns.WithLabelValues("forced").Inc()
	m.met.HandedBack.Add(float64(len(ids)))
	m.stats.handedBack.Add(int64(len(ids)))
	m.forget(ctx, rest, false)
	// Only now are the handlers told: had they returned before the hand-back
	// committed, their outcome would have raced it.
	for _, e := range rest {
		e.cancel(job.ErrShutdown)
	}
	m.log.Info("handed back unfinished jobs", "jobs", len(ids))
}

// forget removes executions from the running set and frees their slots,
// releasing their locks in one round trip unless the caller already did.
// Each is forgotten once, whoever comes first (completer or hand-back).
func (m *Manager) forget(ctx context.Context, es []*execution, releaseLocks bool) {
	keys := make([]string, 0, len(es))
	woken := map[*queueLoop]bool{}
	m.mu.Lock()
	for _, e := range es {
		if m.running[e.claimed.ID] != e {
			continue
		}
		delete(m.running, e.claimed.ID)
		if e.returned {
			e.queue.pending--
		} else {
			e.queue.active--
		}
		keys = append(keys, e.claimed.LockKey)
		woken[e.queue] = true
		m.met.Running.WithLabelValues(e.queue.name).Dec()
	}
	m.mu.Unlock()
	if releaseLocks {
		m.locks.release(ctx, keys)
	}
	for q := range woken {
		q.poke()
	}
}

// route wakes queue loops on dl_jobs notifications and cancels handlers on
// dl_cancel ones.
func (m *Manager) route(ctx context.Context, jobs, cancels *notify.Subscription) {
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-jobs.C:
			if n.Resync || jobs.Missed() {
				for _, q := range m.queues {
					q.poke()
				}
				continue
			}
			if q, ok := m.queues[n.Payload]; ok {
				q.poke()
			}
		case n := <-cancels.C:
			if n.Resync || cancels.Missed() {
				m.pokeHeartbeat()
				continue
			}
			id, err := uuid.Parse(n.Payload)
			if err != nil {
				continue
			}
			m.mu.Lock()
			e := m.running[id]
			m.mu.Unlock()
			if e != nil {
				e.cancel(job.ErrCanceled)
			}
		}
	}
}

func (m *Manager) pokeHeartbeat() {
	select {
	case m.beat <- struct{}{}:
	default:
	}
}

func isCanceled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
