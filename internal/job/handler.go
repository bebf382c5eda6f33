package job

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
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
	// Job is the claimed job: its id, task, args, attempt, and the
	// checkpoint an earlier attempt left.
	Job() Claimed
	// Progress records the handler's progress. Writes are batched (at most a
	// few per second per job); the last value is always written, at the
	// latest together with the job's outcome.
	Progress(p Progress)
	// SetResult records the job's result, stored with its outcome.
	SetResult(result json.RawMessage)
	// Checkpoint stores v, as JSON, as the job's resume point: durably and
	// at once (not batched), fenced on this attempt. A later attempt of the
	// job (a retry, or a run after the lease was lost) reads it from
	// Job().Checkpoint. It returns an error wrapping ErrLeaseLost when the
	// attempt is no longer this worker's.
	Checkpoint(ctx context.Context, v any) error
	// Event appends one event of the given kind, with v as its JSON payload,
	// to the job's journal (e.g. "delivery_attempt"), fenced on this
	// attempt like Checkpoint.
	Event(ctx context.Context, kind string, v any) error
}

// MaxCheckpointBytes bounds a checkpoint's JSON: it is a resume point, not
// a place for data.
const MaxCheckpointBytes = 64 << 10

// Args decodes the job's args into a new T, strictly: an unknown field, a
// value of the wrong type or trailing data is a Permanent error naming the
// field (retrying cannot fix the input). When *T has a Validate() error
// method, its error is returned as Permanent too. Empty args decode to T's
// zero value. To start from defaults, fill a value and use DecodeArgs.
func Args[T any](run Run) (T, error) {
	var v T
	err := DecodeArgs(run.Job().Args, &v)
	return v, err
}

// DecodeArgs decodes raw args into v (a pointer, possibly holding defaults)
// with the rules of Args.
func DecodeArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		dec.UseNumber()
		if err := dec.Decode(v); err != nil {
			return Permanent(argsError(err))
		}
		if _, err := dec.Token(); err != io.EOF {
			return Permanent(Invalid("args", "unexpected data after the JSON object"))
		}
	}
	if val, ok := v.(interface{ Validate() error }); ok {
		if err := val.Validate(); err != nil {
			return Permanent(err)
		}
	}
	return nil
}

// argsError turns a decoding error into an Invalid error naming the field.
func argsError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := "args"
		if te.Field != "" {
			field += "." + te.Field
		}
		return Invalid(field, "must be %s, not a JSON %s", te.Type, te.Value)
	case errors.As(err, &se):
		return Invalid("args", "invalid JSON at byte %d: %v", se.Offset, err)
	}
	const unknown = `json: unknown field "`
	if msg := err.Error(); strings.HasPrefix(msg, unknown) {
		return Invalid("args."+strings.TrimSuffix(strings.TrimPrefix(msg, unknown), `"`), "unknown field")
	}
	return Invalid("args", "%v", err)
}

// retryAfterError carries the delay its handler wants before the next attempt.
type retryAfterError struct {
	err   error
	delay time.Duration
}

func (r retryAfterError) Error() string { return r.err.Error() }
func (r retryAfterError) Unwrap() error { return r.err }

// RetryAfter wraps err so that, when attempts remain, the next attempt
// starts after d instead of after the task's RetryPolicy backoff: for a
// handler that knows better, e.g. from an HTTP Retry-After header. The job
// waits as queued (its worker slot is free meanwhile). RetryAfter(nil, d)
// is nil; a Permanent error stays permanent.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return retryAfterError{err: err, delay: max(d, 0)}
}

// RetryDelay returns the delay err asks for through RetryAfter.
func RetryDelay(err error) (time.Duration, bool) {
	var r retryAfterError
	if errors.As(err, &r) {
		return r.delay, true
	}
	return 0, false
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
