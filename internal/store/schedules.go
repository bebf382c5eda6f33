package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/dataloader/dataloader/internal/dbsqlc"
	"github.com/dataloader/dataloader/internal/job"
)

// Schedule is a periodic job as recorded in dl_schedules: its definition
// and where its ticks stand.
type Schedule struct {
	Name      string          `json:"name"`
	Cron      string          `json:"cron"`
	Queue     string          `json:"queue"`
	Task      string          `json:"task"`
	Args      json.RawMessage `json:"args"`
	LockKey   string          `json:"lock_key"`
	LastTick  *time.Time      `json:"last_tick,omitempty"`
	LastJobID *uuid.UUID      `json:"last_job_id,omitempty"`
	NextTick  *time.Time      `json:"next_tick,omitempty"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// UpsertSchedule records a schedule's definition and its next tick.
func (s *Store) UpsertSchedule(ctx context.Context, sc Schedule) error {
	args := sc.Args
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	err := s.q.ScheduleUpsert(ctx, dbsqlc.ScheduleUpsertParams{Name: sc.Name, Cron: sc.Cron, Queue: sc.Queue,
		Task: sc.Task, Args: args, LockKey: sc.LockKey, NextTick: sc.NextTick})
	if err != nil {
		return fmt.Errorf("record schedule %q: %w", sc.Name, mapErr(err))
	}
	return nil
}

// GetSchedule returns one schedule; job.ErrNotFound when none has the name.
func (s *Store) GetSchedule(ctx context.Context, name string) (Schedule, error) {
	r, err := s.q.ScheduleGet(ctx, name)
	if err != nil {
		return Schedule{}, mapErr(err)
	}
	return scheduleFromRow(r), nil
}

// ListSchedules returns every recorded schedule by name (for the dashboard).
func (s *Store) ListSchedules(ctx context.Context) ([]Schedule, error) {
	rows, err := s.q.ScheduleList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", mapErr(err))
	}
	out := make([]Schedule, len(rows))
	for i, r := range rows {
		out[i] = scheduleFromRow(r)
	}
	return out, nil
}

// Tick is one due tick of a schedule: the job to enqueue for it.
type Tick struct {
	Schedule       string
	At, Next       time.Time
	IdempotencyKey string
	Queue, Task    string
	Args           json.RawMessage
	LockKey        string
	MaxAttempts    int
	LeaseTTLSec    int
}

// FireTick enqueues a tick's job unless another replica already did (same
// idempotency key), and moves the schedule's last and next tick forward. It
// returns the new job's id, or uuid.Nil when the tick's job existed.
func (s *Store) FireTick(ctx context.Context, t Tick) (uuid.UUID, error) {
	args := t.Args
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	row, err := s.q.ScheduleFire(ctx, dbsqlc.ScheduleFireParams{JobID: uuid.Must(uuid.NewV7()), Queue: t.Queue,
		Task: t.Task, Args: args, IdempotencyKey: t.IdempotencyKey, LockKey: t.LockKey,
		MaxAttempts: int32(max(t.MaxAttempts, 1)), LeaseTtlSec: int32(max(t.LeaseTTLSec, 1)),
		Producer: "schedule:" + t.Schedule, Name: t.Schedule, Tick: t.At, NextTick: t.Next})
	if err != nil {
		if job.ErrorCode(mapErr(err)) == job.CodeInvalid {
			return uuid.Nil, job.Invalid("args", "cannot be stored: %s", mapErr(err))
		}
		return uuid.Nil, fmt.Errorf("fire schedule %q at %s: %w", t.Schedule, t.At.Format(time.RFC3339), mapErr(err))
	}
	return row.JobID, nil
}

func scheduleFromRow(r dbsqlc.DlSchedule) Schedule {
	return Schedule{Name: r.Name, Cron: r.Cron, Queue: r.Queue, Task: r.Task, Args: r.Args, LockKey: r.LockKey,
		LastTick: r.LastTick, LastJobID: r.LastJobID, NextTick: r.NextTick, UpdatedAt: r.UpdatedAt}
}
