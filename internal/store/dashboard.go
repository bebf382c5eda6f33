package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/dataloader/dataloader/internal/dbsqlc"
	"github.com/dataloader/dataloader/internal/job"
)

// QueueCount is the number of jobs of one queue in one status.
type QueueCount struct {
	Queue  string
	Status job.Status
	N      int64
}

// CountByQueueStatus counts all jobs by queue and status. It reads the whole
// (status, queue) index: the dashboard calls it from one background cache
// per process, never per request.
func (s *Store) CountByQueueStatus(ctx context.Context) ([]QueueCount, error) {
	rows, err := s.q.DashCountByQueueStatus(ctx)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", mapErr(err))
	}
	out := make([]QueueCount, len(rows))
	for i, r := range rows {
		out[i] = QueueCount{Queue: r.Queue, Status: job.Status(r.Status), N: r.N}
	}
	return out, nil
}

// OldestQueued returns, for each given queue that has queued jobs, the
// earliest available_at among them (one index probe per queue).
func (s *Store) OldestQueued(ctx context.Context, queues []string) (map[string]time.Time, error) {
	rows, err := s.q.DashOldestQueued(ctx, queues)
	if err != nil {
		return nil, fmt.Errorf("oldest queued: %w", mapErr(err))
	}
	out := make(map[string]time.Time, len(rows))
	for _, r := range rows {
		out[r.Queue] = r.Oldest
	}
	return out, nil
}

// QueueSettings returns every queue's stored settings (paused, by whom).
func (s *Store) QueueSettings(ctx context.Context) ([]QueueSetting, error) {
	rows, err := s.q.QueueList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list queue settings: %w", mapErr(err))
	}
	out := make([]QueueSetting, len(rows))
	for i, r := range rows {
		out[i] = QueueSetting{Queue: r.Queue, Paused: r.Paused, UpdatedAt: r.UpdatedAt, UpdatedBy: deref(r.UpdatedBy, "")}
	}
	return out, nil
}

// QueueSetting is one row of dl_queues.
type QueueSetting struct {
	Queue     string
	Paused    bool
	UpdatedAt time.Time
	UpdatedBy string
}

// MinuteCount is how many jobs of a queue finished in one minute.
type MinuteCount struct {
	Queue  string
	Minute time.Time
	N      int64
}

// FinishedPerMinute counts jobs that reached a final status per queue and
// minute with finished_at in [since, until).
func (s *Store) FinishedPerMinute(ctx context.Context, since, until time.Time) ([]MinuteCount, error) {
	rows, err := s.q.DashThroughput(ctx, dbsqlc.DashThroughputParams{Since: since, Until: until})
	if err != nil {
		return nil, fmt.Errorf("finished per minute: %w", mapErr(err))
	}
	out := make([]MinuteCount, len(rows))
	for i, r := range rows {
		out[i] = MinuteCount{Queue: r.Queue, Minute: r.Minute, N: r.N}
	}
	return out, nil
}

// JobsByIDs returns the jobs with the given ids that exist, in no order.
func (s *Store) JobsByIDs(ctx context.Context, ids []uuid.UUID) ([]job.Job, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.q.DashJobsByIDs(ctx, idStrings(ids))
	if err != nil {
		return nil, fmt.Errorf("read %d jobs: %w", len(ids), mapErr(err))
	}
	out := make([]job.Job, len(rows))
	for i, r := range rows {
		out[i] = jobFromRow(r)
	}
	return out, nil
}

// JobRow is what the dashboard's list shows of a job (the job without its
// args, result and lease fields) and the version of its row, which changes
// with every update.
type JobRow struct {
	Job     job.Job
	Version int64
}

// JobRowsByIDs returns the list rows of the jobs with the given ids that
// exist, in no order.
func (s *Store) JobRowsByIDs(ctx context.Context, ids []uuid.UUID) ([]JobRow, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.q.DashJobRowsByIDs(ctx, idStrings(ids))
	if err != nil {
		return nil, fmt.Errorf("read %d job rows: %w", len(ids), mapErr(err))
	}
	out := make([]JobRow, len(rows))
	for i, r := range rows {
		out[i] = JobRow{Version: r.Version, Job: job.Job{ID: r.JobID, Queue: r.Queue, Task: r.Task, LockKey: r.LockKey,
			Status: job.Status(r.Status), Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts),
			CancelRequested: r.CancelRequested, Progress: r.Progress, Error: r.Error, CreatedAt: r.CreatedAt,
			StartedAt: r.StartedAt, FinishedAt: r.FinishedAt}}
	}
	return out, nil
}

// EventsTail returns the newest limit events of a job with ids below
// before (0: the newest of all), oldest first.
func (s *Store) EventsTail(ctx context.Context, id uuid.UUID, before int64, limit int) ([]job.Event, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := s.q.DashEventsTail(ctx, dbsqlc.DashEventsTailParams{JobID: id, Before: before, Max: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", mapErr(err))
	}
	out := make([]job.Event, len(rows))
	for i, r := range rows {
		out[i] = eventFromRow(r)
	}
	return out, nil
}

// EventsAfterMany returns, for each job, its events after its own cursor
// (at most perJob each), ordered by job then event id.
func (s *Store) EventsAfterMany(ctx context.Context, ids []uuid.UUID, afters []int64, perJob int) ([]job.Event, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.q.DashEventsAfterMany(ctx, dbsqlc.DashEventsAfterManyParams{JobIds: idStrings(ids), Afters: afters, PerJob: int32(perJob)})
	if err != nil {
		return nil, fmt.Errorf("list new events of %d jobs: %w", len(ids), mapErr(err))
	}
	out := make([]job.Event, len(rows))
	for i, r := range rows {
		out[i] = eventFromRow(r)
	}
	return out, nil
}

// idStrings formats ids for a text[] parameter (see DashJobsByIDs).
func idStrings(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

func eventFromRow(r dbsqlc.DlJobEvent) job.Event {
	return job.Event{ID: r.EventID, JobID: r.JobID, Queue: r.Queue, TS: r.Ts, Kind: r.Kind, Payload: r.Payload}
}

// WaitFacts is what the database says about why a queued job is not running.
type WaitFacts struct {
	QueuePaused bool
	Holder      uuid.UUID // running job holding the job's lock_key (Nil: none)
	Earlier     uuid.UUID // earlier ready job of the same lock_key (Nil: none)
	Ahead       int       // ready jobs ahead in the queue's claim order (capped at 1000)
	Workers     int       // live worker processes serving the queue
}

// WaitFacts gathers, in one statement, the facts that can keep job j
// waiting. Workers not seen within staleAfter do not count.
func (s *Store) WaitFacts(ctx context.Context, j job.Job, staleAfter time.Duration) (WaitFacts, error) {
	r, err := s.q.DashWaitFacts(ctx, dbsqlc.DashWaitFactsParams{Queue: j.Queue, LockKey: j.LockKey, JobID: j.ID,
		Priority: int32(j.Priority), CreatedAt: j.CreatedAt, StaleSec: staleAfter.Seconds()})
	if err != nil {
		return WaitFacts{}, fmt.Errorf("wait facts of %s: %w", j.ID, mapErr(err))
	}
	return WaitFacts{QueuePaused: r.Paused, Holder: r.Holder, Earlier: r.Earlier, Ahead: int(r.Ahead), Workers: int(r.Workers)}, nil
}

// LockHolder is a running job, which holds its lock_key.
type LockHolder struct {
	JobID       uuid.UUID
	Queue, Task string
	StartedAt   *time.Time
	HeartbeatAt *time.Time
	WorkerID    string
	Progress    json.RawMessage
}

// LockWaiter is a queued job waiting on a held lock_key.
type LockWaiter struct {
	JobID       uuid.UUID
	Queue, Task string
	Priority    int
	CreatedAt   time.Time
	AvailableAt time.Time
}

// Lock is a busy lock_key: its running holder and the jobs queued behind it.
type Lock struct {
	Key     string
	Holders []LockHolder // one, unless a lease is being taken over
	Waiting int          // queued jobs of the key (capped at 1000)
	Waiters []LockWaiter // the first few in claim order
}

// Locks lists up to max busy lock_keys, those with the most waiting jobs
// first, each with up to perKey waiters.
func (s *Store) Locks(ctx context.Context, max, perKey int) ([]Lock, error) {
	rows, err := s.q.DashLockHolders(ctx, int32(max))
	if err != nil {
		return nil, fmt.Errorf("list lock holders: %w", mapErr(err))
	}
	byKey := map[string]*Lock{}
	var keys []string
	for _, r := range rows {
		l, ok := byKey[r.LockKey]
		if !ok {
			l = &Lock{Key: r.LockKey, Waiting: int(r.Waiting)}
			byKey[r.LockKey] = l
			keys = append(keys, r.LockKey)
		}
		l.Holders = append(l.Holders, LockHolder{JobID: r.JobID, Queue: r.Queue, Task: r.Task, StartedAt: r.StartedAt,
			HeartbeatAt: r.HeartbeatAt, WorkerID: deref(r.WorkerID, ""), Progress: r.Progress})
	}
	if len(keys) > 0 && perKey > 0 {
		ws, err := s.q.DashLockWaiters(ctx, dbsqlc.DashLockWaitersParams{LockKeys: keys, PerKey: int32(perKey)})
		if err != nil {
			return nil, fmt.Errorf("list lock waiters: %w", mapErr(err))
		}
		for _, w := range ws {
			l := byKey[w.LockKey]
			l.Waiters = append(l.Waiters, LockWaiter{JobID: w.JobID, Queue: w.Queue, Task: w.Task, Priority: int(w.Priority),
				CreatedAt: w.CreatedAt, AvailableAt: w.AvailableAt})
		}
	}
	out := make([]Lock, 0, len(keys))
	for _, k := range keys {
		out = append(out, *byKey[k])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Waiting > out[j].Waiting })
	return out, nil
}

// BulkResult says what a bulk action did.
type BulkResult struct {
	Requested int // ids asked for
	Changed   int // jobs whose state the action changed
	Skipped   int // jobs still locked by another transaction after the retries
}

// bulkAttempts is how often a bulk action retries rows another transaction
// held (a worker's claim or finish commits within milliseconds).
const bulkAttempts = 3

// CancelMany requests cancellation of many jobs in set-wise statements (see
// JobCancelMany): queued ones are canceled at once, running ones flagged and
// their workers told. Jobs in other states are left alone.
func (s *Store) CancelMany(ctx context.Context, ids []uuid.UUID, by string) (BulkResult, error) {
	return s.bulk(ctx, ids, func(ctx context.Context, ids []uuid.UUID) ([]uuid.UUID, error) {
		rows, err := s.q.JobCancelMany(ctx, dbsqlc.JobCancelManyParams{JobIds: ids, By: by})
		out := make([]uuid.UUID, len(rows))
		for i, r := range rows {
			out[i] = r.JobID
		}
		return out, err
	}, []job.Status{job.StatusQueued, job.StatusRunning})
}

// RetryMany puts many failed, canceled or lost jobs back to queued (see
// JobRetryMany). Jobs in other states are left alone.
func (s *Store) RetryMany(ctx context.Context, ids []uuid.UUID, by string) (BulkResult, error) {
	return s.bulk(ctx, ids, func(ctx context.Context, ids []uuid.UUID) ([]uuid.UUID, error) {
		rows, err := s.q.JobRetryMany(ctx, dbsqlc.JobRetryManyParams{JobIds: ids, By: by})
		out := make([]uuid.UUID, len(rows))
		for i, r := range rows {
			out[i] = r.JobID
		}
		return out, err
	}, []job.Status{job.StatusFailed, job.StatusCanceled, job.StatusLost})
}

// bulk runs a set-wise action, then retries the ids that were skipped
// because they were locked, as long as they are still in an applicable
// status.
func (s *Store) bulk(ctx context.Context, ids []uuid.UUID, do func(context.Context, []uuid.UUID) ([]uuid.UUID, error), applicable []job.Status) (BulkResult, error) {
	res := BulkResult{Requested: len(ids)}
	pending := ids
	for attempt := 0; attempt < bulkAttempts && len(pending) > 0; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
			}
		}
		changed, err := do(ctx, pending)
		if err != nil {
			return res, fmt.Errorf("bulk action on %d jobs: %w", len(pending), mapErr(err))
		}
		res.Changed += len(changed)
		done := make(map[uuid.UUID]bool, len(changed))
		for _, id := range changed {
			done[id] = true
		}
		var rest []uuid.UUID
		for _, id := range pending {
			if !done[id] {
				rest = append(rest, id)
			}
		}
		if len(rest) == 0 {
			return res, nil
		}
		// Of the rest, only those still applicable were skipped for a lock.
		pending, err = s.stillIn(ctx, rest, applicable)
		if err != nil {
			return res, err
		}
	}
	res.Skipped = len(pending)
	return res, nil
}

// stillIn returns the ids whose job is in one of the statuses.
func (s *Store) stillIn(ctx context.Context, ids []uuid.UUID, statuses []job.Status) ([]uuid.UUID, error) {
	jobs, err := s.JobsByIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
	var out []uuid.UUID
	for _, j := range jobs {
		for _, st := range statuses {
			if j.Status == st {
				out = append(out, j.ID)
				break
			}
		}
	}
	return out, nil
}
