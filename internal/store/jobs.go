package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/dataloader/dataloader/internal/dbsqlc"
	"github.com/dataloader/dataloader/internal/job"
)

// TriggerResult is the answer to a trigger: the job and whether this call
// created it (false when its idempotency_key already existed).
type TriggerResult struct {
	JobID   uuid.UUID
	Status  job.Status
	Created bool
}

// Trigger enqueues a job. A duplicate idempotency_key returns the existing
// job, also when identical requests race: ON CONFLICT DO NOTHING waits for
// the first inserter, and the existing row is then read in a new snapshot.
// A job with a CoalesceKey supersedes the queued jobs of its key (see
// TriggerTx).
func (s *Store) Trigger(ctx context.Context, p job.TriggerParams, defaultLeaseTTL int) (TriggerResult, error) {
	if err := p.Validate(); err != nil {
		return TriggerResult{}, err
	}
	if p.CoalesceKey != nil {
		return s.triggerCoalesced(ctx, p, defaultLeaseTTL)
	}
	return trigger(ctx, s.q, p, defaultLeaseTTL)
}

// trigger inserts a validated job through q (a pool or a transaction).
func trigger(ctx context.Context, q *dbsqlc.Queries, p job.TriggerParams, defaultLeaseTTL int) (TriggerResult, error) {
	args := p.Args
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	row, err := q.JobInsert(ctx, dbsqlc.JobInsertParams{
		JobID:          uuid.Must(uuid.NewV7()),
		Queue:          p.Queue,
		Task:           p.Task,
		Args:           args,
		IdempotencyKey: p.IdempotencyKey,
		LockKey:        p.LockKey,
		PartitionKey:   p.PartitionKey,
		Priority:       int32(deref(p.Priority, job.DefaultPriority)),
		AvailableAt:    p.AvailableAt,
		MaxAttempts:    int32(deref(p.MaxAttempts, job.DefaultMaxAttempts)),
		LeaseTtlSec:    int32(deref(p.LeaseTTLSec, defaultLeaseTTL)),
		Producer:       p.Producer,
	})
	return insertOutcome(ctx, q, p, row.JobID, row.Status, err)
}

// insertOutcome turns the result of a one-job insert (which returns no row
// when the idempotency key exists) into the trigger's answer: created, or
// the existing job, read in a new snapshot so a concurrent identical insert
// that committed meanwhile is seen.
func insertOutcome(ctx context.Context, q *dbsqlc.Queries, p job.TriggerParams, id uuid.UUID, status string, err error) (TriggerResult, error) {
	if err == nil {
		return TriggerResult{JobID: id, Status: job.Status(status), Created: true}, nil
	}
	if err = mapErr(err); !errors.Is(err, job.ErrNotFound) || p.IdempotencyKey == nil {
		if job.ErrorCode(err) == job.CodeInvalid {
			// Text fields were validated; what PostgreSQL still refuses is
			// in args (e.g. a lone UTF-16 surrogate escape in jsonb).
			return TriggerResult{}, job.Invalid("args", "cannot be stored: %s", err)
		}
		return TriggerResult{}, fmt.Errorf("insert job: %w", err)
	}
	existing, err := q.JobGetByIdempotencyKey(ctx, p.IdempotencyKey)
	if err != nil {
		return TriggerResult{}, fmt.Errorf("read job by idempotency key: %w", mapErr(err))
	}
	return TriggerResult{JobID: existing.JobID, Status: job.Status(existing.Status)}, nil
}

// NewJob is one job of a batch insert (a shorthand of job.TriggerParams for
// bulk producers such as benchmarks).
type NewJob struct {
	Queue, Task, LockKey string
	Args                 json.RawMessage
	IdempotencyKey       string
	Priority             int
	MaxAttempts          int
}

// TriggerMany inserts a batch of jobs in one statement and returns the ids
// of those created (jobs whose idempotency key exists are skipped).
func (s *Store) TriggerMany(ctx context.Context, jobs []NewJob, leaseTTL int) ([]uuid.UUID, error) {
	ps := make([]job.TriggerParams, len(jobs))
	for i, j := range jobs {
		ps[i] = job.TriggerParams{Queue: j.Queue, Task: j.Task, LockKey: j.LockKey, Args: j.Args}
		if j.IdempotencyKey != "" {
			ps[i].IdempotencyKey = &j.IdempotencyKey
		}
		if j.Priority != 0 {
			ps[i].Priority = &j.Priority
		}
		if j.MaxAttempts != 0 {
			ps[i].MaxAttempts = &j.MaxAttempts
		}
	}
	p := insertParams(ps, leaseTTL)
	ids, err := s.q.JobInsertMany(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("insert %d jobs: %w", len(jobs), mapErr(err))
	}
	return ids, nil
}

// TriggerBatch inserts already validated triggers in one statement and
// answers each, in order: created, or the existing job of its idempotency
// key (also when an identical key was inserted concurrently, or twice within
// the batch).
// Jobs with a CoalesceKey are inserted one by one in one transaction.
func (s *Store) TriggerBatch(ctx context.Context, ps []job.TriggerParams, defaultLeaseTTL int) ([]TriggerResult, error) {
	if hasCoalesceKey(ps) {
		return s.triggerBatchCoalesced(ctx, ps, defaultLeaseTTL)
	}
	return triggerBatch(ctx, s.q, ps, defaultLeaseTTL)
}

// triggerBatch inserts validated jobs through q (a pool or a transaction).
func triggerBatch(ctx context.Context, q *dbsqlc.Queries, ps []job.TriggerParams, defaultLeaseTTL int) ([]TriggerResult, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	p := insertParams(ps, defaultLeaseTTL)
	created, err := q.JobInsertMany(ctx, p)
	if err != nil {
		if job.ErrorCode(mapErr(err)) == job.CodeInvalid {
			return nil, job.Invalid("args", "cannot be stored: %s", mapErr(err))
		}
		return nil, fmt.Errorf("insert %d jobs: %w", len(ps), mapErr(err))
	}
	isNew := make(map[uuid.UUID]bool, len(created))
	for _, id := range created {
		isNew[id] = true
	}
	out := make([]TriggerResult, len(ps))
	var missing []string
	for i, id := range p.JobIds {
		if isNew[id] {
			out[i] = TriggerResult{JobID: id, Status: job.StatusQueued, Created: true}
			delete(isNew, id)
		} else if k := p.IdempotencyKeys[i]; k != "" {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	rows, err := q.JobGetManyByIdempotencyKey(ctx, missing)
	if err != nil {
		return nil, fmt.Errorf("read existing jobs by idempotency key: %w", mapErr(err))
	}
	existing := make(map[string]TriggerResult, len(rows))
	for _, r := range rows {
		existing[*r.IdempotencyKey] = TriggerResult{JobID: r.JobID, Status: job.Status(r.Status)}
	}
	for i, id := range p.JobIds {
		if out[i].JobID != uuid.Nil || p.IdempotencyKeys[i] == "" {
			continue
		}
		r, ok := existing[p.IdempotencyKeys[i]]
		if !ok {
			return nil, fmt.Errorf("job %s: idempotency key %q neither inserted nor found", id, p.IdempotencyKeys[i])
		}
		out[i] = r
	}
	return out, nil
}

func insertParams(ps []job.TriggerParams, defaultLeaseTTL int) dbsqlc.JobInsertManyParams {
	var p dbsqlc.JobInsertManyParams
	for _, t := range ps {
		args := string(t.Args)
		if len(bytes.TrimSpace(t.Args)) == 0 {
			args = "{}"
		}
		var availableAt string
		if t.AvailableAt != nil {
			availableAt = t.AvailableAt.Format(time.RFC3339Nano)
		}
		p.JobIds = append(p.JobIds, uuid.Must(uuid.NewV7()))
		p.Queues = append(p.Queues, t.Queue)
		p.Tasks = append(p.Tasks, t.Task)
		p.Args = append(p.Args, args)
		p.IdempotencyKeys = append(p.IdempotencyKeys, deref(t.IdempotencyKey, ""))
		p.LockKeys = append(p.LockKeys, t.LockKey)
		p.PartitionKeys = append(p.PartitionKeys, t.PartitionKey)
		p.Priorities = append(p.Priorities, int32(deref(t.Priority, job.DefaultPriority)))
		p.AvailableAts = append(p.AvailableAts, availableAt)
		p.MaxAttempts = append(p.MaxAttempts, int32(deref(t.MaxAttempts, job.DefaultMaxAttempts)))
		p.LeaseTtls = append(p.LeaseTtls, int32(deref(t.LeaseTTLSec, defaultLeaseTTL)))
		p.Producers = append(p.Producers, deref(t.Producer, ""))
	}
	return p
}

// Get returns one job.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (job.Job, error) {
	row, err := s.q.JobGet(ctx, id)
	if err != nil {
		return job.Job{}, mapErr(err)
	}
	return jobFromRow(row), nil
}

// Cancel requests a job's cancellation: a queued job is canceled at once, a
// running one is flagged and its worker told. Cancelling a job that already
// ended as canceled is a no-op; any other finished job is a conflict.
func (s *Store) Cancel(ctx context.Context, id uuid.UUID, by string) (job.Job, error) {
	_, err := s.q.JobCancel(ctx, dbsqlc.JobCancelParams{JobID: id, By: by})
	if err := mapErr(err); err != nil && !errors.Is(err, job.ErrNotFound) {
		return job.Job{}, fmt.Errorf("cancel job: %w", err)
	}
	j, err := s.Get(ctx, id)
	if err != nil {
		return job.Job{}, err
	}
	if j.Status.Finished() && j.Status != job.StatusCanceled {
		return j, job.Errorf(job.CodeConflict, "job already %s", j.Status)
	}
	return j, nil
}

// Retry puts a failed, canceled or lost job back to queued with
// extraAttempts more attempts (its own max_attempts when ≤ 0).
func (s *Store) Retry(ctx context.Context, id uuid.UUID, extraAttempts int, by string) (job.Job, error) {
	if extraAttempts <= 0 {
		j, err := s.Get(ctx, id)
		if err != nil {
			return job.Job{}, err
		}
		extraAttempts = max(j.MaxAttempts, 1)
	}
	_, err := s.q.JobRetry(ctx, dbsqlc.JobRetryParams{JobID: id, ExtraAttempts: int32(extraAttempts), By: by})
	if err := mapErr(err); err != nil {
		if !errors.Is(err, job.ErrNotFound) {
			return job.Job{}, fmt.Errorf("retry job: %w", err)
		}
		j, gerr := s.Get(ctx, id)
		if gerr != nil {
			return job.Job{}, gerr
		}
		return j, job.Errorf(job.CodeConflict, "a %s job cannot be retried (only failed, canceled or lost)", j.Status)
	}
	return s.Get(ctx, id)
}

// Events returns a job's journal after event id `after`, oldest first.
func (s *Store) Events(ctx context.Context, id uuid.UUID, after int64, limit int) ([]job.Event, error) {
	rows, err := s.q.EventListByJob(ctx, dbsqlc.EventListByJobParams{JobID: id, After: after, Max: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", mapErr(err))
	}
	out := make([]job.Event, len(rows))
	for i, r := range rows {
		out[i] = job.Event{ID: r.EventID, JobID: r.JobID, Queue: r.Queue, TS: r.Ts, Kind: r.Kind, Payload: r.Payload}
	}
	return out, nil
}

func jobFromRow(r dbsqlc.DlJob) job.Job {
	return job.Job{
		ID: r.JobID, Queue: r.Queue, Task: r.Task, Args: r.Args, IdempotencyKey: r.IdempotencyKey,
		LockKey: r.LockKey, PartitionKey: r.PartitionKey, Priority: int(r.Priority), AvailableAt: r.AvailableAt,
		Status: job.Status(r.Status), Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts),
		LeaseTTLSec: int(r.LeaseTtlSec), LeaseExpiresAt: r.LeaseExpiresAt, HeartbeatAt: r.HeartbeatAt,
		CancelRequested: r.CancelRequested, Progress: r.Progress, Error: r.Error, Producer: r.Producer,
		CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Result: r.Result,
		WorkerID: r.WorkerID,
	}
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// EventsRange returns journal events with after < event_id ≤ upTo in id
// order, at most limit of them.
func (s *Store) EventsRange(ctx context.Context, after, upTo int64, limit int) ([]job.Event, error) {
	rows, err := s.q.EventListRange(ctx, dbsqlc.EventListRangeParams{After: after, UpTo: upTo, Max: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", mapErr(err))
	}
	out := make([]job.Event, len(rows))
	for i, r := range rows {
		out[i] = job.Event{ID: r.EventID, JobID: r.JobID, Queue: r.Queue, TS: r.Ts, Kind: r.Kind, Payload: r.Payload}
	}
	return out, nil
}

// LastEventID returns the highest event id in the journal (0 when empty).
func (s *Store) LastEventID(ctx context.Context) (int64, error) {
	id, err := s.q.EventMaxID(ctx)
	if err != nil {
		return 0, fmt.Errorf("last event id: %w", mapErr(err))
	}
	return id, nil
}
