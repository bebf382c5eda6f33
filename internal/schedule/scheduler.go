package schedule

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/robfig/cron/v3"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
)

// maxCatchUp bounds the walk over missed ticks: only the latest missed tick
// fires ("fire once" after downtime), and finding it stops after this many
// steps (a per-second schedule after a long outage simply resumes).
const maxCatchUp = 100_000

// Scheduler fires the ticks of its schedules until its context ends. Run
// one in every replica.
type Scheduler struct {
	Store *store.Store
	Specs []Spec
	// DefaultLeaseTTL is the lease of jobs whose spec sets none (seconds).
	DefaultLeaseTTL int
	Log             *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (s *Scheduler) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Run records the schedules, fires the latest tick missed while no replica
// ran (once), then fires every tick as it comes. It returns nil when ctx
// ends.
func (s *Scheduler) Run(ctx context.Context) error {
	if len(s.Specs) == 0 {
		return nil
	}
	now := s.now()
	next := make([]time.Time, len(s.Specs))
	for i := range s.Specs {
		sp := &s.Specs[i]
		next[i] = sp.sched.Next(now)
		s.record(ctx, sp, next[i])
		if prev, err := s.Store.GetSchedule(ctx, sp.Name); err == nil && prev.LastTick != nil {
			if t, ok := latest(sp.sched, *prev.LastTick, now); ok {
				s.fire(ctx, sp, t, next[i])
			}
		}
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		earliest := next[0]
		for _, t := range next[1:] {
			if t.Before(earliest) {
				earliest = t
			}
		}
		timer.Reset(max(earliest.Sub(s.now()), 0))
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		now := s.now()
		for i := range s.Specs {
			if next[i].After(now) {
				continue
			}
			sp := &s.Specs[i]
			// Normally one tick is due; after a stall, only the latest.
			tick, _ := latest(sp.sched, next[i].Add(-time.Nanosecond), now)
			next[i] = sp.sched.Next(now)
			s.fire(ctx, sp, tick, next[i])
		}
	}
}

// latest returns the last tick t of sched with after < t ≤ now.
func latest(sched cron.Schedule, after, now time.Time) (time.Time, bool) {
	t := sched.Next(after)
	if t.IsZero() || t.After(now) {
		return time.Time{}, false
	}
	for i := 0; i < maxCatchUp; i++ {
		n := sched.Next(t)
		if n.IsZero() || n.After(now) {
			break
		}
		t = n
	}
	return t, true
}

// TickKey is the idempotency key of a schedule's job for one tick.
func TickKey(name string, tick time.Time) string {
	return "schedule:" + name + ":" + tick.UTC().Format(time.RFC3339)
}

// fire enqueues the job of one tick (a no-op when another replica did).
func (s *Scheduler) fire(ctx context.Context, sp *Spec, tick, next time.Time) {
	p := sp.trigger()
	ttl := s.DefaultLeaseTTL
	if p.LeaseTTLSec != nil {
		ttl = *p.LeaseTTLSec
	}
	maxAttempts := job.DefaultMaxAttempts
	if p.MaxAttempts != nil {
		maxAttempts = *p.MaxAttempts
	}
	id, err := s.Store.FireTick(ctx, store.Tick{Schedule: sp.Name, At: tick, Next: next,
		IdempotencyKey: TickKey(sp.Name, tick), Queue: p.Queue, Task: p.Task, Args: p.Args,
		LockKey: p.LockKey, MaxAttempts: maxAttempts, LeaseTTLSec: max(ttl, 1)})
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		s.Log.Error("schedule tick not enqueued", "schedule", sp.Name, "tick", tick, "error", err)
	case err == nil && id != uuid.Nil:
		s.Log.Info("schedule fired", "schedule", sp.Name, "tick", tick, "job_id", id, "queue", p.Queue, "task", p.Task)
	}
}

// record upserts the schedule's definition; failures are logged (the
// ticks do not depend on it).
func (s *Scheduler) record(ctx context.Context, sp *Spec, next time.Time) {
	err := s.Store.UpsertSchedule(ctx, store.Schedule{Name: sp.Name, Cron: sp.Cron, Queue: sp.Queue, Task: sp.Task,
		Args: sp.Args, LockKey: sp.LockKey, NextTick: &next})
	if err != nil && ctx.Err() == nil {
		s.Log.Warn("could not record schedule", "schedule", sp.Name, "error", err)
	}
}
