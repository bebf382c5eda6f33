package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataloader/dataloader/internal/dbsqlc"
	"github.com/dataloader/dataloader/internal/job"
)

// Fence names a running attempt and the worker that holds it: writes made
// during a run (checkpoints, handler events) match nothing once the attempt
// is no longer that worker's.
type Fence struct {
	Attempt
	WorkerID string
}

// FenceOf returns the fence of a claimed attempt.
func FenceOf(c job.Claimed) Fence {
	return Fence{Attempt: Attempt{JobID: c.ID, Attempt: c.Attempt}, WorkerID: c.WorkerID}
}

// SaveCheckpoint stores a running attempt's resume point. It returns an
// error wrapping job.ErrLeaseLost when the attempt is no longer held.
func (s *Store) SaveCheckpoint(ctx context.Context, f Fence, checkpoint json.RawMessage) error {
	return saveCheckpoint(ctx, s.q, f, checkpoint)
}

// SaveCheckpointTx is SaveCheckpoint inside tx, so that a pipeline commits
// its own writes and its resume point together (tx must be on the product's
// database).
func SaveCheckpointTx(ctx context.Context, tx pgx.Tx, f Fence, checkpoint json.RawMessage) error {
	return saveCheckpoint(ctx, dbsqlc.New(tx), f, checkpoint)
}

func saveCheckpoint(ctx context.Context, q *dbsqlc.Queries, f Fence, checkpoint json.RawMessage) error {
	if len(checkpoint) > job.MaxCheckpointBytes {
		return fmt.Errorf("checkpoint of %d bytes exceeds %d", len(checkpoint), job.MaxCheckpointBytes)
	}
	_, err := q.JobCheckpointSave(ctx, dbsqlc.JobCheckpointSaveParams{Checkpoint: checkpoint, JobID: f.JobID,
		Attempt: int32(f.Attempt.Attempt), WorkerID: f.WorkerID})
	if err = mapErr(err); errors.Is(err, job.ErrNotFound) {
		return fmt.Errorf("save checkpoint of job %s: %w", f.JobID, job.ErrLeaseLost)
	} else if err != nil {
		return fmt.Errorf("save checkpoint of job %s: %w", f.JobID, err)
	}
	return nil
}

// AppendEvent writes one handler event to a running attempt's journal and
// returns its id; an error wrapping job.ErrLeaseLost when the attempt is no
// longer held.
func (s *Store) AppendEvent(ctx context.Context, f Fence, kind string, payload json.RawMessage) (int64, error) {
	if err := job.ValidText("kind", kind, job.MaxNameLen); err != nil || kind == "" {
		return 0, fmt.Errorf("event kind %q: must be 1..%d bytes of text", kind, job.MaxNameLen)
	}
	id, err := s.q.EventInsertFenced(ctx, dbsqlc.EventInsertFencedParams{Kind: kind, Payload: payload,
		JobID: f.JobID, Attempt: int32(f.Attempt.Attempt), WorkerID: f.WorkerID})
	if err = mapErr(err); errors.Is(err, job.ErrNotFound) {
		return 0, fmt.Errorf("append %s event to job %s: %w", kind, f.JobID, job.ErrLeaseLost)
	} else if err != nil {
		return 0, fmt.Errorf("append %s event to job %s: %w", kind, f.JobID, err)
	}
	return id, nil
}

// TriggerTx enqueues a job inside the caller's transaction, with the
// semantics of Trigger: a duplicate idempotency_key returns the existing
// job, the queued event is written with the row, and the queue's
// notification goes out when tx commits. A job with a CoalesceKey takes a
// transaction-scoped advisory lock on its key (held until tx ends, so
// producers of one key serialize) and cancels the key's queued jobs.
func TriggerTx(ctx context.Context, tx pgx.Tx, p job.TriggerParams, defaultLeaseTTL int) (TriggerResult, error) {
	if err := p.Validate(); err != nil {
		return TriggerResult{}, err
	}
	q := dbsqlc.New(tx)
	if p.CoalesceKey != nil {
		return triggerCoalescedOn(ctx, q, p, defaultLeaseTTL)
	}
	return trigger(ctx, q, p, defaultLeaseTTL)
}

// TriggerBatchTx is TriggerBatch inside the caller's transaction; every
// trigger is validated first.
func TriggerBatchTx(ctx context.Context, tx pgx.Tx, ps []job.TriggerParams, defaultLeaseTTL int) ([]TriggerResult, error) {
	for i := range ps {
		if err := ps[i].Validate(); err != nil {
			return nil, fmt.Errorf("job %d of %d: %w", i+1, len(ps), err)
		}
	}
	q := dbsqlc.New(tx)
	if hasCoalesceKey(ps) {
		return triggerEach(ctx, q, ps, defaultLeaseTTL)
	}
	return triggerBatch(ctx, q, ps, defaultLeaseTTL)
}

func hasCoalesceKey(ps []job.TriggerParams) bool {
	for _, p := range ps {
		if p.CoalesceKey != nil {
			return true
		}
	}
	return false
}

// triggerCoalesced runs a coalesced insert in its own transaction.
func (s *Store) triggerCoalesced(ctx context.Context, p job.TriggerParams, defaultLeaseTTL int) (res TriggerResult, err error) {
	err = s.inTx(ctx, func(q *dbsqlc.Queries) error {
		res, err = triggerCoalescedOn(ctx, q, p, defaultLeaseTTL)
		return err
	})
	return res, err
}

// triggerBatchCoalesced inserts a batch holding coalesced jobs one by one,
// in one transaction.
func (s *Store) triggerBatchCoalesced(ctx context.Context, ps []job.TriggerParams, defaultLeaseTTL int) (out []TriggerResult, err error) {
	err = s.inTx(ctx, func(q *dbsqlc.Queries) error {
		out, err = triggerEach(ctx, q, ps, defaultLeaseTTL)
		return err
	})
	return out, err
}

func triggerEach(ctx context.Context, q *dbsqlc.Queries, ps []job.TriggerParams, defaultLeaseTTL int) ([]TriggerResult, error) {
	out := make([]TriggerResult, len(ps))
	for i, p := range ps {
		var err error
		if p.CoalesceKey != nil {
			out[i], err = triggerCoalescedOn(ctx, q, p, defaultLeaseTTL)
		} else {
			out[i], err = trigger(ctx, q, p, defaultLeaseTTL)
		}
		if err != nil {
			return nil, fmt.Errorf("job %d of %d: %w", i+1, len(ps), err)
		}
	}
	return out, nil
}

// triggerCoalescedOn inserts a job with a coalesce_key through q, which
// must be a transaction: the advisory lock it takes lasts until its end.
func triggerCoalescedOn(ctx context.Context, q *dbsqlc.Queries, p job.TriggerParams, defaultLeaseTTL int) (TriggerResult, error) {
	if err := q.CoalesceLock(ctx, *p.CoalesceKey); err != nil {
		return TriggerResult{}, fmt.Errorf("lock coalesce key: %w", mapErr(err))
	}
	args := p.Args
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	row, err := q.JobInsertCoalesced(ctx, dbsqlc.JobInsertCoalescedParams{
		JobID: uuid.Must(uuid.NewV7()), Queue: p.Queue, Task: p.Task, Args: args,
		IdempotencyKey: p.IdempotencyKey, LockKey: p.LockKey, PartitionKey: p.PartitionKey,
		Priority:    int32(deref(p.Priority, job.DefaultPriority)),
		AvailableAt: p.AvailableAt, MaxAttempts: int32(deref(p.MaxAttempts, job.DefaultMaxAttempts)),
		LeaseTtlSec: int32(deref(p.LeaseTTLSec, defaultLeaseTTL)), Producer: p.Producer,
		CoalesceKey: *p.CoalesceKey,
	})
	return insertOutcome(ctx, q, p, row.JobID, row.Status, err)
}

// inTx runs fn in a transaction on the pool: committed when fn returns nil,
// rolled back otherwise.
func (s *Store) inTx(ctx context.Context, fn func(q *dbsqlc.Queries) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return fn(s.q.WithTx(tx)) })
}

// Alert is a final failure taken from the alert outbox.
type Alert struct {
	JobID    uuid.UUID
	Queue    string
	Task     string
	Status   job.Status // failed or lost
	Attempt  int
	Error    string
	Producer string
	At       time.Time
}

// TakeAlerts takes up to max final failures out of the outbox and, in the
// same transaction, enqueues the jobs deliveries returns for them (webhook
// deliveries): each failure is taken, and its delivery enqueued, exactly
// once across replicas. It returns the alerts taken.
func (s *Store) TakeAlerts(ctx context.Context, max int, deliveries func([]Alert) []job.TriggerParams, defaultLeaseTTL int) ([]Alert, error) {
	var out []Alert
	err := s.inTx(ctx, func(q *dbsqlc.Queries) error {
		rows, err := q.AlertTake(ctx, int32(max))
		if err != nil {
			return fmt.Errorf("take alerts: %w", mapErr(err))
		}
		out = make([]Alert, len(rows))
		for i, r := range rows {
			out[i] = Alert{JobID: r.JobID, Queue: r.Queue, Task: r.Task, Status: job.Status(r.Status),
				Attempt: int(r.Attempt), Error: deref(r.Error, ""), Producer: deref(r.Producer, ""), At: r.CreatedAt}
		}
		if len(out) == 0 || deliveries == nil {
			return nil
		}
		ps := deliveries(out)
		for i := range ps {
			if err := ps[i].Validate(); err != nil {
				return fmt.Errorf("alert delivery: %w", err)
			}
		}
		if _, err := triggerBatch(ctx, q, ps, defaultLeaseTTL); err != nil {
			return fmt.Errorf("enqueue alert deliveries: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteFinished deletes up to max jobs that finished (succeeded, failed,
// canceled, lost) before cutoff, with their events, in one statement, and
// returns how many jobs and events it deleted.
func (s *Store) DeleteFinished(ctx context.Context, cutoff time.Time, max int) (jobs, events int64, err error) {
	r, err := s.q.JobDeleteFinished(ctx, dbsqlc.JobDeleteFinishedParams{Cutoff: cutoff, Max: int32(max)})
	if err != nil {
		return 0, 0, fmt.Errorf("delete finished jobs: %w", mapErr(err))
	}
	return r.Jobs, r.Events, nil
}
