package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/dataloader/dataloader/internal/dbsqlc"
	"github.com/dataloader/dataloader/internal/job"
)

// Attempt names one claimed attempt of a job: every write a worker makes
// about it is fenced on the attempt number and the worker's id.
type Attempt struct {
	JobID   uuid.UUID
	Attempt int
}

// Claim takes up to max ready jobs of queue for worker (see JobClaim in
// queries/jobs.sql for the ordering and lock_key rules).
func (s *Store) Claim(ctx context.Context, queue, worker string, max int) ([]job.Claimed, error) {
	rows, err := s.q.JobClaim(ctx, dbsqlc.JobClaimParams{Queue: queue, Max: int32(max), WorkerID: worker})
	if err != nil {
		return nil, fmt.Errorf("claim from %q: %w", queue, mapErr(err))
	}
	out := make([]job.Claimed, len(rows))
	for i, r := range rows {
		out[i] = job.Claimed{ID: r.JobID, Queue: r.Queue, Task: r.Task, Args: r.Args, LockKey: r.LockKey,
			Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts), LeaseTTLSec: int(r.LeaseTtlSec),
			Progress: r.Progress, CreatedAt: r.CreatedAt, AvailableAt: r.AvailableAt,
			Checkpoint: r.Checkpoint, WorkerID: worker}
	}
	return out, nil
}

// Requeue reasons and their journal kinds.
const (
	ReasonLockConflict = "lock_conflict"
	ReasonShutdown     = "shutdown"
	ReasonLockLost     = "lock_lost"
)

// Requeue hands attempts back to the queue without charging them, after
// delay. Reason lock_conflict journals a lock_conflict event, others a
// requeue event with the reason. It returns the jobs actually handed back.
func (s *Store) Requeue(ctx context.Context, worker string, attempts []Attempt, delay time.Duration, reason string) ([]uuid.UUID, error) {
	if len(attempts) == 0 {
		return nil, nil
	}
	kind := job.EventRequeue
	if reason == ReasonLockConflict {
		kind = job.EventLockConflict
	}
	ids, atts := splitAttempts(attempts)
	out, err := s.q.JobRequeueMany(ctx, dbsqlc.JobRequeueManyParams{JobIds: ids, Attempts: atts,
		WorkerID: worker, DelaySec: delay.Seconds(), Kind: kind, Reason: reason})
	if err != nil {
		return nil, fmt.Errorf("requeue %d jobs: %w", len(attempts), mapErr(err))
	}
	return out, nil
}

// HeartbeatResult says, for one attempt still held, whether its cancellation
// was requested.
type HeartbeatResult struct {
	JobID           uuid.UUID
	CancelRequested bool
}

// Heartbeat extends the leases of all given attempts in one statement and
// returns those still held by worker; the others were reaped or taken over.
func (s *Store) Heartbeat(ctx context.Context, worker string, attempts []Attempt) ([]HeartbeatResult, error) {
	if len(attempts) == 0 {
		return nil, nil
	}
	ids, atts := splitAttempts(attempts)
	rows, err := s.q.JobHeartbeatMany(ctx, dbsqlc.JobHeartbeatManyParams{JobIds: ids, Attempts: atts, WorkerID: worker})
	if err != nil {
		return nil, fmt.Errorf("heartbeat %d jobs: %w", len(attempts), mapErr(err))
	}
	out := make([]HeartbeatResult, len(rows))
	for i, r := range rows {
		out[i] = HeartbeatResult{JobID: r.JobID, CancelRequested: r.CancelRequested}
	}
	return out, nil
}

// ProgressUpdate is the latest progress JSON of one attempt.
type ProgressUpdate struct {
	Attempt
	Progress []byte
}

// SaveProgress writes the progress of many running attempts in one statement.
func (s *Store) SaveProgress(ctx context.Context, worker string, ups []ProgressUpdate) error {
	if len(ups) == 0 {
		return nil
	}
	p := dbsqlc.JobProgressManyParams{WorkerID: worker}
	ups = byJobID(ups, func(u ProgressUpdate) uuid.UUID { return u.JobID })
	for _, u := range ups {
		p.JobIds = append(p.JobIds, u.JobID)
		p.Attempts = append(p.Attempts, int32(u.Attempt.Attempt))
		p.Progress = append(p.Progress, string(u.Progress))
	}
	if err := s.q.JobProgressMany(ctx, p); err != nil {
		return fmt.Errorf("save progress of %d jobs: %w", len(ups), mapErr(err))
	}
	return nil
}

// Outcome is how an attempt ended.
type Outcome string

// Outcomes of an attempt.
const (
	OutcomeSucceeded Outcome = "succeeded"
	OutcomeRetry     Outcome = "retry" // back to queued after Backoff, or failed when attempts are spent
	OutcomeFailed    Outcome = "failed"
	OutcomeCanceled  Outcome = "canceled"
)

// Finish is the outcome of one attempt.
type Finish struct {
	Attempt
	Outcome  Outcome
	Error    string
	Backoff  time.Duration
	Result   []byte // JSON or nil
	Progress []byte // JSON or nil (keep the stored progress)
}

// Finished is a job whose outcome was recorded.
type Finished struct {
	JobID   uuid.UUID
	Queue   string
	Status  job.Status
	Attempt int
}

// FinishMany records many outcomes in one statement. Attempts no longer held
// by worker are left untouched and absent from the result.
func (s *Store) FinishMany(ctx context.Context, worker string, fs []Finish) ([]Finished, error) {
	if len(fs) == 0 {
		return nil, nil
	}
	p := dbsqlc.JobFinishManyParams{WorkerID: worker}
	fs = byJobID(fs, func(f Finish) uuid.UUID { return f.JobID })
	for _, f := range fs {
		p.JobIds = append(p.JobIds, f.JobID)
		p.Attempts = append(p.Attempts, int32(f.Attempt.Attempt))
		p.Outcomes = append(p.Outcomes, string(f.Outcome))
		p.Errors = append(p.Errors, f.Error)
		p.BackoffMs = append(p.BackoffMs, f.Backoff.Milliseconds())
		p.Results = append(p.Results, string(f.Result))
		p.Progress = append(p.Progress, string(f.Progress))
	}
	rows, err := s.q.JobFinishMany(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("finish %d jobs: %w", len(fs), mapErr(err))
	}
	out := make([]Finished, len(rows))
	for i, r := range rows {
		out[i] = Finished{JobID: r.JobID, Queue: r.Queue, Status: job.Status(r.Status), Attempt: int(r.Attempt)}
	}
	return out, nil
}

// Rescued is a job the reaper took back from an expired lease.
type Rescued struct {
	JobID  uuid.UUID
	Queue  string
	Status job.Status // queued, or lost when no attempts remained
}

// RescueExpired returns up to max running jobs whose lease expired to the
// queue (or marks them lost).
func (s *Store) RescueExpired(ctx context.Context, reaper string, max int) ([]Rescued, error) {
	rows, err := s.q.JobRescueExpired(ctx, dbsqlc.JobRescueExpiredParams{Max: int32(max), Reaper: reaper})
	if err != nil {
		return nil, fmt.Errorf("rescue expired jobs: %w", mapErr(err))
	}
	out := make([]Rescued, len(rows))
	for i, r := range rows {
		out[i] = Rescued{JobID: r.JobID, Queue: r.Queue, Status: job.Status(r.Status)}
	}
	return out, nil
}

// NextAvailable returns when the next queued job of queue becomes ready, and
// false when none is queued.
func (s *Store) NextAvailable(ctx context.Context, queue string) (time.Time, bool, error) {
	t, err := s.q.JobNextAvailable(ctx, queue)
	switch err = mapErr(err); {
	case errors.Is(err, job.ErrNotFound):
		return time.Time{}, false, nil
	case err != nil:
		return time.Time{}, false, fmt.Errorf("next available in %q: %w", queue, err)
	}
	return t, true, nil
}

// splitAttempts returns the attempts' ids and numbers, sorted by id so that
// many-row writes lock rows in one order.
func splitAttempts(as []Attempt) ([]uuid.UUID, []int32) {
	as = byJobID(as, func(a Attempt) uuid.UUID { return a.JobID })
	ids := make([]uuid.UUID, len(as))
	atts := make([]int32, len(as))
	for i, a := range as {
		ids[i], atts[i] = a.JobID, int32(a.Attempt)
	}
	return ids, atts
}

// byJobID returns a copy of xs sorted by job id: many-row writes take their
// rows in one order so that they cannot deadlock each other.
func byJobID[T any](xs []T, id func(T) uuid.UUID) []T {
	xs = slices.Clone(xs)
	slices.SortFunc(xs, func(a, b T) int { ia, ib := id(a), id(b); return bytes.Compare(ia[:], ib[:]) })
	return xs
}
