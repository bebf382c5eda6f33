package job

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"time"
)

// Handler runs one task. Its context is cancelled when the job's cancellation
// is requested (cause ErrCanceled), when the attempt is lost (ErrLeaseLost) or
// when the process hands the job back on shutdown (ErrShutdown); handlers
// check it between chunks of work. A nil return means success; an error
// wrapped with Permanent fails the job without retries; any other error is
// retried with the task's backoff while attempts remain.
type Handler interface {
	Work(ctx context.Context, run Run) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, run Run) error

// Work calls f.
func (f HandlerFunc) Work(ctx context.Context, run Run) error { return f(ctx, run) }

// Run is a handler's view of the attempt it executes.
type Run interface {
	// Job is the claimed job: its id, task, args and attempt.
	Job() Claimed
	// Progress records the handler's progress. Writes are batched (at most a
	// few per second per job); the last value is always written, at the
	// latest together with the job's outcome.
	Progress(p Progress)
	// SetResult records the job's result, stored with its outcome.
	SetResult(result json.RawMessage)
}

// RetryPolicy says how long a failed attempt waits before the next one.
type RetryPolicy interface {
	// Backoff is the delay after the given (1-based) failed attempt.
	Backoff(attempt int) time.Duration
}

// Linear waits Step × attempt: the seed's default policy is Linear{30 * time.Second}.
type Linear struct{ Step time.Duration }

// Backoff implements RetryPolicy.
func (l Linear) Backoff(attempt int) time.Duration { return l.Step * time.Duration(max(attempt, 1)) }

// Exponential waits Base × 2^(attempt−1), capped at Cap, with up to Jitter
// (a fraction, 0..1) of it taken off at random so that retries of many jobs
// that failed together spread out.
type Exponential struct {
	Base   time.Duration
	Cap    time.Duration
	Jitter float64
}

// Backoff implements RetryPolicy.
func (e Exponential) Backoff(attempt int) time.Duration {
	d := e.Base
	for i := 1; i < attempt && (e.Cap <= 0 || d < e.Cap); i++ {
		d *= 2
	}
	if e.Cap > 0 && d > e.Cap {
		d = e.Cap
	}
	if e.Jitter > 0 {
		d -= time.Duration(rand.Float64() * e.Jitter * float64(d))
	}
	return d
}

// DefaultRetry is the policy of tasks that do not set one: 30 s × attempt.
var DefaultRetry RetryPolicy = Linear{Step: 30 * time.Second}
