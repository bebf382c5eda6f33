package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
)

// execution is one claimed attempt running in this process. It implements
// job.Run for the handler.
type execution struct {
	claimed job.Claimed
	mgr     *Manager // for the writes a handler makes during its run
	queue   *queueLoop
	task    Task
	known   bool // a handler is registered for the task
	ctx     context.Context
	cancel  context.CancelCauseFunc
	started time.Time
	// returned is set (under Manager.mu) when the handler has returned: its
	// slot is free and its outcome is on its way to the database.
	returned bool

	mu            sync.Mutex
	progress      []byte
	progressDirty bool
	result        []byte
	err           error // the handler's return
	lockLost      bool  // the advisory lock could not be re-taken after the lock session dropped
}

var _ job.Run = (*execution)(nil)

func (e *execution) attempt() store.Attempt {
	return store.Attempt{JobID: e.claimed.ID, Attempt: e.claimed.Attempt}
}

// Job implements job.Run.
func (e *execution) Job() job.Claimed { return e.claimed }

// Progress implements job.Run: the value is kept in memory and written by
// the manager's progress flusher, and with the outcome.
func (e *execution) Progress(p job.Progress) {
	b, err := json.Marshal(p)
	if err != nil {
		return
	}
	e.mu.Lock()
	e.progress, e.progressDirty = b, true
	e.mu.Unlock()
}

// SetResult implements job.Run.
func (e *execution) SetResult(r json.RawMessage) {
	if !json.Valid(r) {
		r, _ = json.Marshal(string(r))
	}
	e.mu.Lock()
	e.result = append([]byte(nil), r...)
	e.mu.Unlock()
}

// takeProgress returns the progress not yet written, if any.
func (e *execution) takeProgress() ([]byte, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.progressDirty {
		return nil, false
	}
	e.progressDirty = false
	return e.progress, true
}

// Checkpoint implements job.Run: one fenced statement, at once, so the
// resume point is durable when Checkpoint returns.
func (e *execution) Checkpoint(ctx context.Context, v any) error {
	b, err := marshalJSON(v)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return e.mgr.store.SaveCheckpoint(ctx, e.fence(), b)
}

// Event implements job.Run: one fenced insert into the job's journal.
func (e *execution) Event(ctx context.Context, kind string, v any) error {
	b, err := marshalJSON(v)
	if err != nil {
		return fmt.Errorf("event %s: %w", kind, err)
	}
	_, err = e.mgr.store.AppendEvent(ctx, e.fence(), kind, b)
	return err
}

func (e *execution) fence() store.Fence {
	return store.Fence{Attempt: e.attempt(), WorkerID: e.mgr.cfg.WorkerID}
}

// marshalJSON encodes v, passing JSON that is already encoded through.
func marshalJSON(v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case json.RawMessage:
		if !json.Valid(x) {
			return nil, errors.New("invalid JSON")
		}
		return x, nil
	case nil:
		return json.RawMessage("null"), nil
	}
	return json.Marshal(v)
}
