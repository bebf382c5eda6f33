package job

import (
	"errors"
	"fmt"
)

// Code classifies an error so that each boundary (HTTP, CLI) can answer it
// the right way without knowing where it came from.
type Code string

// Error codes. The web layer maps each to one HTTP status.
const (
	CodeInvalid     Code = "invalid"     // the caller sent something wrong
	CodeNotFound    Code = "not_found"   // no such job (or queue, ...)
	CodeConflict    Code = "conflict"    // valid request, but not in the entity's current state
	CodeUnavailable Code = "unavailable" // the process cannot take it now (draining); retry elsewhere
	CodeInternal    Code = "internal"
)

// Error is an error that carries a Code, a message meant for the caller, and
// for invalid input the field at fault.
type Error struct {
	Code    Code
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// Invalid returns a CodeInvalid error naming the field at fault.
func Invalid(field, format string, args ...any) error {
	return &Error{Code: CodeInvalid, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Errorf returns an error with the given code.
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrNotFound is returned when a job does not exist.
var ErrNotFound = &Error{Code: CodeNotFound, Message: "job not found"}

// ErrorCode returns the code of err, CodeInternal when it carries none.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// permanentError marks a handler error that must not be retried.
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent wraps err so that the job fails at once instead of being retried.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// ErrCanceled is the cause of a handler's context when an operator or the API
// requested the job's cancellation.
var ErrCanceled = errors.New("job cancel requested")

// ErrLeaseLost is the cause of a handler's context when the job is no longer
// running under this attempt (reaped, taken over, or its lock was lost).
var ErrLeaseLost = errors.New("job lease lost")

// ErrShutdown is the cause of a handler's context when the process hands
// the job back at the end of its shutdown grace period.
var ErrShutdown = errors.New("worker shutting down")
