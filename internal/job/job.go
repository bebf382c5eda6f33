// Package job holds dataloader's domain types: jobs, their statuses and events,
// the handler contract that pipelines implement, and the error kinds every
// layer shares. It does no I/O.
package job

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Status is where a job is in its lifecycle.
type Status string

// The statuses of the seed's dl_status enum.
const (
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusCanceled  Status = "canceled"
	StatusLost      Status = "lost"
)

// Statuses lists every status in lifecycle order.
var Statuses = []Status{StatusQueued, StatusRunning, StatusSucceeded, StatusFailed, StatusCanceled, StatusLost}

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// Finished reports whether s is terminal: the job will not run again unless
// an operator retries it.
func (s Status) Finished() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCanceled || s == StatusLost
}

// Retryable reports whether an operator may put a job in status s back to queued.
func (s Status) Retryable() bool {
	return s == StatusFailed || s == StatusCanceled || s == StatusLost
}

// Job is one row of dl_jobs.
type Job struct {
	ID              uuid.UUID       `json:"job_id"`
	Queue           string          `json:"queue"`
	Task            string          `json:"task"`
	Args            json.RawMessage `json:"args"`
	IdempotencyKey  *string         `json:"idempotency_key,omitempty"`
	LockKey         string          `json:"lock_key"`
	PartitionKey    string          `json:"partition_key"`
	Priority        int             `json:"priority"`
	AvailableAt     time.Time       `json:"available_at"`
	Status          Status          `json:"status"`
	Attempt         int             `json:"attempt"`
	MaxAttempts     int             `json:"max_attempts"`
	LeaseTTLSec     int             `json:"lease_ttl_sec"`
	LeaseExpiresAt  *time.Time      `json:"lease_expires_at,omitempty"`
	HeartbeatAt     *time.Time      `json:"heartbeat_at,omitempty"`
	CancelRequested bool            `json:"cancel_requested"`
	Progress        json.RawMessage `json:"progress"`
	Error           *string         `json:"error,omitempty"`
	Producer        *string         `json:"producer,omitempty"`
	CreatedAt       time.Time       `json:"created_at"`
	StartedAt       *time.Time      `json:"started_at,omitempty"`
	FinishedAt      *time.Time      `json:"finished_at,omitempty"`
	Result          json.RawMessage `json:"result,omitempty"`
	WorkerID        *string         `json:"worker_id,omitempty"`
}

// Claimed is what a worker knows about a job it has just claimed: enough to
// run it and to fence every later write on the attempt it owns.
type Claimed struct {
	ID          uuid.UUID
	Queue       string
	Task        string
	Args        json.RawMessage
	LockKey     string
	Attempt     int
	MaxAttempts int
	LeaseTTLSec int
	Progress    json.RawMessage
	CreatedAt   time.Time
	AvailableAt time.Time // when it became ready: the start of its wait
	// Checkpoint is the resume point an earlier attempt stored with
	// Run.Checkpoint (nil when none did).
	Checkpoint json.RawMessage
	// WorkerID is the process that claimed this attempt; with ID and
	// Attempt it fences the attempt's writes.
	WorkerID string
}

// Progress is what a handler reports about its advance. It is stored as the
// job's progress JSON.
type Progress struct {
	Done    int64  `json:"done"`
	Total   int64  `json:"total,omitempty"`
	Unit    string `json:"unit,omitempty"`
	Stage   string `json:"stage,omitempty"`
	Message string `json:"message,omitempty"`
}

// Event is one row of the dl_job_events journal.
type Event struct {
	ID      int64           `json:"event_id"`
	JobID   uuid.UUID       `json:"job_id"`
	Queue   string          `json:"queue"`
	TS      time.Time       `json:"ts"`
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Event kinds written to the journal.
const (
	EventQueued          = "queued"
	EventPicked          = "picked"
	EventHeartbeat       = "heartbeat"
	EventProgress        = "progress"
	EventLockConflict    = "lock_conflict"
	EventRequeue         = "requeue"
	EventDone            = "done"
	EventFailed          = "failed"
	EventCancelRequested = "cancel_requested"
	EventCanceled        = "canceled"
	EventRetried         = "retried"
	EventReaped          = "reaped"
	EventLost            = "lost"
)

// QueueStats is a queue with its job counts by status.
type QueueStats struct {
	Queue          string           `json:"queue"`
	Paused         bool             `json:"paused"`
	Counts         map[Status]int64 `json:"counts"`
	OldestQueuedAt *time.Time       `json:"oldest_queued_at,omitempty"`
}
