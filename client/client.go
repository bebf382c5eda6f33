// Package client enqueues dataloader jobs from a Go program, inside the
// program's own pgx transaction: the job exists if and only if the caller's
// transaction commits, so a service can record its own change and the work
// it implies atomically (the transactional outbox pattern, without an
// outbox).
//
//	tx, _ := pool.Begin(ctx)
//	defer tx.Rollback(ctx)
//	// … the service's own writes …
//	id, err := client.Enqueue(ctx, tx, client.Params{Queue: "etl", Task: "etl.load",
//		Args: map[string]any{"source": "https://…/day.csv", "table": "public.sales", "keys": []string{"id"}},
//		LockKey: "sales", IdempotencyKey: "sales-2026-11-22"})
//	// …
//	err = tx.Commit(ctx) // workers are notified on commit
//
// The insert is the one the JSON API's trigger runs: a duplicate
// IdempotencyKey returns the existing job instead of a second row, the
// "queued" event is written with the job, and the queue's workers are woken
// by NOTIFY when the transaction commits. The database must have been
// migrated by dataloader (`web migrate`).
package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
)

// JobID identifies a job (a UUIDv7).
type JobID = uuid.UUID

// DefaultLeaseTTLSec is the lease of jobs whose Params set none (the
// product's default DL_DEFAULT_LEASE_TTL_SEC).
const DefaultLeaseTTLSec = 60

// Params describe a job to enqueue. Zero values of the optional fields take
// the defaults.
type Params struct {
	Queue string // required
	Task  string // required
	// Args is the job's args: a JSON object, given as json.RawMessage,
	// []byte, or any value that encodes to one.
	Args    any
	LockKey string // required: jobs of one key run one at a time, in order
	// IdempotencyKey, when set, makes Enqueue return the existing job of the
	// key instead of inserting a second one.
	IdempotencyKey string
	PartitionKey   string
	// CoalesceKey, when set, cancels the queued (not running) jobs with the
	// same key in favour of this one.
	CoalesceKey string
	Priority    *int      // lower runs first; default 100
	AvailableAt time.Time // not before; zero = now
	MaxAttempts int       // default 5
	LeaseTTLSec int       // default DefaultLeaseTTLSec
	Producer    string    // who enqueued it, for the journal
}

// Result answers one enqueue.
type Result struct {
	JobID JobID
	// Created is false when the IdempotencyKey existed and JobID is that
	// job's.
	Created bool
}

// Enqueue inserts one job in tx and returns its id (or, for an existing
// IdempotencyKey, the existing job's id). Invalid params are refused before
// anything is written, with a *job.Error naming the field.
func Enqueue(ctx context.Context, tx pgx.Tx, p Params) (JobID, error) {
	tp, err := p.trigger()
	if err != nil {
		return uuid.Nil, err
	}
	res, err := store.TriggerTx(ctx, tx, tp, DefaultLeaseTTLSec)
	if err != nil {
		return uuid.Nil, fmt.Errorf("enqueue %s on %s: %w", p.Task, p.Queue, err)
	}
	return res.JobID, nil
}

// EnqueueMany inserts jobs in tx, in one statement when none has a
// CoalesceKey, and answers each in order.
func EnqueueMany(ctx context.Context, tx pgx.Tx, ps []Params) ([]Result, error) {
	tps := make([]job.TriggerParams, len(ps))
	for i, p := range ps {
		tp, err := p.trigger()
		if err != nil {
			return nil, fmt.Errorf("job %d of %d: %w", i+1, len(ps), err)
		}
		tps[i] = tp
	}
	res, err := store.TriggerBatchTx(ctx, tx, tps, DefaultLeaseTTLSec)
	if err != nil {
		return nil, fmt.Errorf("enqueue %d jobs: %w", len(ps), err)
	}
	out := make([]Result, len(res))
	for i, r := range res {
		out[i] = Result{JobID: r.JobID, Created: r.Created}
	}
	return out, nil
}

// trigger converts p to the engine's trigger parameters.
func (p Params) trigger() (job.TriggerParams, error) {
	tp := job.TriggerParams{Queue: p.Queue, Task: p.Task, LockKey: p.LockKey, PartitionKey: p.PartitionKey,
		Priority: p.Priority}
	switch a := p.Args.(type) {
	case nil:
	case json.RawMessage:
		tp.Args = a
	case []byte:
		tp.Args = a
	default:
		b, err := json.Marshal(a)
		if err != nil {
			return tp, job.Invalid("args", "cannot be encoded as JSON: %v", err)
		}
		tp.Args = b
	}
	if p.IdempotencyKey != "" {
		tp.IdempotencyKey = &p.IdempotencyKey
	}
	if p.CoalesceKey != "" {
		tp.CoalesceKey = &p.CoalesceKey
	}
	if !p.AvailableAt.IsZero() {
		tp.AvailableAt = &p.AvailableAt
	}
	if p.MaxAttempts != 0 {
		tp.MaxAttempts = &p.MaxAttempts
	}
	if p.LeaseTTLSec != 0 {
		tp.LeaseTTLSec = &p.LeaseTTLSec
	}
	if p.Producer != "" {
		tp.Producer = &p.Producer
	}
	return tp, tp.Validate()
}

// Error is the error of invalid params: errors.As(err, new(*client.Error))
// gives the field at fault and the message.
type Error = job.Error
