package views

import "time"

// Statuses lists the job statuses in lifecycle order (the views' copy of
// job.Statuses, so views need no domain import).
var Statuses = []string{"queued", "running", "succeeded", "failed", "canceled", "lost"}

// StatusCount is how many jobs are in one status.
type StatusCount struct {
	Status string
	N      int64
}

// QueuesView is the queues overview.
type QueuesView struct {
	Now    time.Time
	Queues []QueueRow
	// Schedules are the periodic jobs (DL_SCHEDULES_JSON); filled for the
	// full page only, not for its live updates.
	Schedules []ScheduleRow
}

// ScheduleRow is one periodic job and its ticks.
type ScheduleRow struct {
	Name, Cron, Queue, Task string
	LastTick, NextTick      *time.Time
	LastJobID               string
}

// QueueRow is one queue of the overview.
type QueueRow struct {
	Name     string
	Paused   bool
	PausedBy string
	Counts   []StatusCount // every status, in Statuses order
	// OldestReady is when the longest-waiting ready job became ready (nil:
	// no job is waiting).
	OldestReady *time.Time
	// Throughput holds jobs finished per minute over the last hour, oldest
	// minute first; the last element is the current, partial minute.
	Throughput []int64
	Workers    int // live worker processes serving the queue
	Slots      int // their handler slots
}

// Count returns the count of status st.
func (q QueueRow) Count(st string) int64 {
	for _, c := range q.Counts {
		if c.Status == st {
			return c.N
		}
	}
	return 0
}

// Total is the number of jobs of the queue.
func (q QueueRow) Total() int64 {
	var n int64
	for _, c := range q.Counts {
		n += c.N
	}
	return n
}

// JobsFilter is the jobs list's filter as typed by the user.
type JobsFilter struct {
	Queue, Status, Task, LockKey, Text string
}

// Query renders the filter as URL query parameters (without "?").
func (f JobsFilter) Query() string { return filterQuery(f) }

// Empty reports whether nothing is filtered.
func (f JobsFilter) Empty() bool { return f == JobsFilter{} }

// JobsView is the jobs list.
type JobsView struct {
	Now    time.Time
	Filter JobsFilter
	Rows   []JobRow
	Cursor string // this page's cursor ("" on the first page)
	Next   string // the next page's cursor ("" when there is none)
	// Scanned is how many jobs a text search looked at for this page.
	Scanned int
	Queues  []string // known queue names, for the filter's suggestions
	Counts  QueueCounts
	BulkCap int
	Error   string // why the filter was refused
}

// QueueCounts are the status counts shown above the list: of one queue, or
// of all queues when Queue is empty.
type QueueCounts struct {
	Queue  string
	Counts []StatusCount
}

// JobRow is one job of the list.
type JobRow struct {
	ID              string
	Queue, Task     string
	LockKey         string
	Status          string
	Attempt         int
	MaxAttempts     int
	CancelRequested bool
	Progress        *ProgressView
	CreatedAt       time.Time
	StartedAt       *time.Time
	FinishedAt      *time.Time
	Error           string
}

// CanCancel reports whether cancel applies to the job's state.
func (r JobRow) CanCancel() bool {
	return (r.Status == "queued" || r.Status == "running") && !r.CancelRequested
}

// CanRetry reports whether retry applies to the job's state.
func (r JobRow) CanRetry() bool {
	return r.Status == "failed" || r.Status == "canceled" || r.Status == "lost"
}

// ProgressView is a job's reported progress.
type ProgressView struct {
	Done, Total int64
	Unit, Stage string
	Message     string
	// ETA is the estimated finish time (nil: unknown).
	ETA *time.Time
}

// Percent is Done of Total in whole percent (0 without a total).
func (p ProgressView) Percent() int {
	if p.Total <= 0 {
		return 0
	}
	return int(min(100, 100*p.Done/p.Total))
}

// JobPageView is the job detail page.
type JobPageView struct {
	Job      JobView
	Args     string // pretty JSON
	Timeline TimelineView
}

// JobView is the live part of the job detail page.
type JobView struct {
	Now             time.Time
	ID              string
	Queue, Task     string
	LockKey         string
	PartitionKey    string
	Status          string
	Priority        int
	Attempt         int
	MaxAttempts     int
	LeaseTTLSec     int
	CancelRequested bool
	IdempotencyKey  string
	Producer        string
	WorkerID        string
	CreatedAt       time.Time
	AvailableAt     time.Time
	StartedAt       *time.Time
	FinishedAt      *time.Time
	LeaseExpiresAt  *time.Time
	HeartbeatAt     *time.Time
	Error           string
	Result          string // pretty JSON
	Progress        *ProgressView
	ProgressJSON    string // raw progress when it is not {done, total}
	Waiting         []WaitReason
}

// Row returns the job as a list row (for the shared state rules).
func (j JobView) Row() JobRow {
	return JobRow{ID: j.ID, Status: j.Status, CancelRequested: j.CancelRequested}
}

// WaitReason is one reason a queued job is not running.
type WaitReason struct {
	Kind  string // paused, scheduled, backoff, lock_held, lock_earlier, no_worker, ready
	Text  string
	JobID string     // a job the reason refers to ("" when none)
	Until *time.Time // when the reason ends, if known
}

// TimelineView is a job's event journal, oldest first.
type TimelineView struct {
	JobID  string
	Events []EventView
	// EarlierBefore is the event id to page back from (0: nothing earlier).
	EarlierBefore int64
}

// EventView is one journal event.
type EventView struct {
	ID     int64
	TS     time.Time
	Kind   string
	Detail string // the payload as compact JSON
}

// LocksView lists busy lock keys.
type LocksView struct {
	Now   time.Time
	Locks []LockView
}

// LockView is one busy lock_key.
type LockView struct {
	Key     string
	Holders []LockJob
	Waiting int
	Waiters []LockJob
}

// LockJob is a job in the locks view.
type LockJob struct {
	ID          string
	Queue, Task string
	Since       *time.Time // started (holder) or ready (waiter)
	Progress    *ProgressView
}

// WorkersView lists live worker processes.
type WorkersView struct {
	Now     time.Time
	Workers []WorkerView
}

// WorkerView is one worker process.
type WorkerView struct {
	ID       string
	Host     string
	PID      int
	Version  string
	Queues   []WorkerQueue
	Slots    int
	Running  int
	Draining bool
	// DrainUntil is when a draining process hands back what still runs.
	DrainUntil *time.Time
	StartedAt  time.Time
	SeenAt     time.Time
	Stale      bool // not seen for longer than a few heartbeats
}

// WorkerQueue is a queue a worker serves with its concurrency.
type WorkerQueue struct {
	Name        string
	Concurrency int
}

// TriggerView is the trigger form.
type TriggerView struct {
	Values  TriggerValues
	Errors  map[string]string // field → message
	General string            // a message not about one field
	Created *TriggerResult
	Queues  []string
	Tasks   []string
}

// TriggerValues are the form's fields as typed.
type TriggerValues struct {
	Queue, Task, LockKey, Args string
	Priority, IdempotencyKey   string
	AvailableAt, MaxAttempts   string
}

// TriggerResult is the job a trigger created or found.
type TriggerResult struct {
	ID       string
	Status   string
	Existing bool // the idempotency key named an existing job
}

// BulkView is the bulk action panel: a confirmation or a result.
type BulkView struct {
	Op     string // cancel or retry
	Scope  string // selected or filter
	IDs    []string
	Filter JobsFilter
	N      int  // jobs the action would touch now
	Capped bool // more match than the cap
	Cap    int
	Done   *BulkDone
	Error  string
}

// BulkDone is the outcome of a confirmed bulk action.
type BulkDone struct {
	Requested, Changed, Skipped int
}
