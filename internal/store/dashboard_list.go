package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataloader/dataloader/internal/dbsqlc"
	"github.com/dataloader/dataloader/internal/job"
)

// The jobs list of the dashboard and the API. Its SQL is assembled here, and only here, from
// the fixed fragments below; values are always bound parameters. Each filter
// combination thus becomes its own statement with only the predicates it
// needs, instead of a catch-all "(x IS NULL OR col = x)" form, whose
// generic plan cannot pick the index that serves the filter. Statements run
// in QueryExecModeExec (unnamed statement, planned at bind time with the
// actual values), so "status = failed" and "status = succeeded" each get the
// plan their statistics call for.
//
// Every filter column has an index in job_id order (migrations/
// 00004_dashboard.sql): a page is one backward range scan that stops after
// Limit rows. Those indexes leave running jobs out (so claims and heartbeats,
// the hottest updates, do not write them); a filtered page therefore is the
// union of that scan and the matching running jobs, which are few (at most
// the fleet's worker slots) and found through the running-only lease index.
const (
	listColumns = `job_id, queue, task, args, idempotency_key, lock_key, partition_key, priority,
  available_at, status, attempt, max_attempts, lease_ttl_sec, lease_expires_at, heartbeat_at,
  cancel_requested, progress, error, producer, consumer_group, created_at, started_at, finished_at,
  result, worker_id`
	fragQueue      = `queue = $%d::text`
	fragStatus     = `status = $%d::text::dl_status`
	fragStatusIn   = `status = ANY ($%d::text[]::dl_status[])`
	fragTask       = `task = $%d::text`
	fragLockKey    = `lock_key = $%d::text`
	fragBefore     = `job_id < $%d::uuid`
	fragText       = `(args::text ILIKE $%[1]d::text OR error ILIKE $%[1]d::text)`
	fragNotRunning = `status <> 'running'`
	fragRunning    = `status = 'running'`

	// newestOne: the newest rows matching one WHERE clause.
	newestOne = `SELECT %s FROM dl_jobs%s ORDER BY job_id DESC LIMIT %d`
	// newestSplit: the same, for a filter served by the indexes without
	// running jobs: those rows, and the running ones, merged.
	newestSplit = `SELECT * FROM (
  (SELECT %[1]s FROM dl_jobs WHERE %[2]s ORDER BY job_id DESC LIMIT %[4]d)
  UNION ALL
  (SELECT %[1]s FROM dl_jobs WHERE %[3]s ORDER BY job_id DESC LIMIT %[4]d)
) u ORDER BY job_id DESC LIMIT %[4]d`
	// listTextWindow: a bounded text search. It looks at the newest
	// window rows matching the other filters, after the cursor, and returns
	// how many it scanned, the oldest id it scanned and the ids (newest
	// first, at most limit) whose args or error contain the text. The next
	// page continues below the last hit, or below the window when it held
	// fewer hits than a page.
	listTextWindow = `WITH w AS MATERIALIZED (%s)
SELECT (SELECT count(*) FROM w)::int AS scanned,
       (SELECT job_id FROM w ORDER BY job_id LIMIT 1) AS oldest,
       ARRAY(SELECT job_id FROM w WHERE hit ORDER BY job_id DESC LIMIT %d) AS hits`
)

// Bounds of the dashboard's list queries.
const (
	// TextScanWindow is how many rows one text-search page looks at.
	TextScanWindow = 10_000
	// MaxPage is the largest page the list serves.
	MaxPage = 500
)

// JobFilter selects jobs for the dashboard. Empty fields do not filter.
type JobFilter struct {
	Queue, Task, LockKey string
	Status               job.Status
	// StatusIn restricts to these statuses (bulk actions: the ones the
	// action applies to); combined with Status when both are set.
	StatusIn []job.Status
	// Text is searched, case-insensitively, in args (as JSON text) and error.
	Text string
	// Before is the keyset cursor: only jobs older than this id.
	Before uuid.UUID
	Limit  int
}

// Validate checks the filter's text fields.
func (f JobFilter) Validate() error {
	for _, v := range []struct{ field, value string }{{"queue", f.Queue}, {"task", f.Task}, {"lock_key", f.LockKey}, {"q", f.Text}} {
		if err := job.ValidText(v.field, v.value, job.MaxKeyLen); err != nil {
			return err
		}
	}
	if f.Status != "" && !f.Status.Valid() {
		return job.Invalid("status", "unknown status %q", f.Status)
	}
	return nil
}

// newest renders the statement selecting cols of the newest limit jobs
// matching f (text aside), and its arguments; extra (with its own
// arguments appended after f's) is one more column expression, e.g. the
// text predicate.
func (f JobFilter) newest(cols string, limit int, extra func(next int) (string, []any)) (string, []any) {
	var conds []string
	var args []any
	add := func(frag string, v any) {
		args = append(args, v)
		conds = append(conds, fmt.Sprintf(frag, len(args)))
	}
	if f.Queue != "" {
		add(fragQueue, f.Queue)
	}
	if f.Status != "" {
		add(fragStatus, string(f.Status))
	}
	if len(f.StatusIn) > 0 {
		ss := make([]string, len(f.StatusIn))
		for i, s := range f.StatusIn {
			ss[i] = string(s)
		}
		add(fragStatusIn, ss)
	}
	if f.Task != "" {
		add(fragTask, f.Task)
	}
	if f.LockKey != "" {
		add(fragLockKey, f.LockKey)
	}
	indexed := len(conds) > 0 // a filter column: served by the indexes without running jobs
	if f.Before != uuid.Nil {
		add(fragBefore, f.Before.String())
	}
	if extra != nil {
		col, xargs := extra(len(args) + 1)
		cols += ", " + col
		args = append(args, xargs...)
	}
	where := func(more ...string) string {
		all := append(append([]string(nil), conds...), more...)
		if len(all) == 0 {
			return ""
		}
		return " WHERE " + strings.Join(all, " AND ")
	}
	running, others := f.mayBe(job.StatusRunning), f.mayBeOther(job.StatusRunning)
	switch {
	case !indexed: // no filter column: the primary key's order serves
		return fmt.Sprintf(newestOne, cols, where(), limit), args
	case !running:
		return fmt.Sprintf(newestOne, cols, where(fragNotRunning), limit), args
	case !others:
		return fmt.Sprintf(newestOne, cols, where(fragRunning), limit), args
	}
	return fmt.Sprintf(newestSplit, cols, strings.TrimPrefix(where(fragNotRunning), " WHERE "),
		strings.TrimPrefix(where(fragRunning), " WHERE "), limit), args
}

// mayBe reports whether jobs in status st can match the filter.
func (f JobFilter) mayBe(st job.Status) bool {
	if f.Status != "" && f.Status != st {
		return false
	}
	return len(f.StatusIn) == 0 || slices.Contains(f.StatusIn, st)
}

// mayBeOther reports whether jobs in a status other than st can match.
func (f JobFilter) mayBeOther(st job.Status) bool {
	if f.Status != "" {
		return f.Status != st && f.mayBe(f.Status)
	}
	for _, s := range f.StatusIn {
		if s != st {
			return true
		}
	}
	return len(f.StatusIn) == 0
}

// likePattern makes text a literal ILIKE "contains" pattern.
func likePattern(text string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(text) + "%"
}

// JobPage is one page of the dashboard's jobs list.
type JobPage struct {
	Jobs []job.Job
	// Next is the cursor of the next page (uuid.Nil: no more jobs).
	Next uuid.UUID
	// Scanned is how many rows a text search looked at (0 without text).
	Scanned int
}

// ListJobs returns a page of jobs matching f, newest first. Without text it
// is one index range scan; with text it scans at most TextScanWindow rows
// (the page may then hold fewer than Limit jobs while Next is set: the
// search continues below the window on the next page).
func (s *Store) ListJobs(ctx context.Context, f JobFilter) (JobPage, error) {
	if err := f.Validate(); err != nil {
		return JobPage{}, err
	}
	limit := min(max(f.Limit, 1), MaxPage)
	if f.Text == "" {
		sql, args := f.newest(listColumns, limit, nil)
		jobs, err := s.queryJobs(ctx, sql, args...)
		if err != nil {
			return JobPage{}, fmt.Errorf("list jobs: %w", err)
		}
		page := JobPage{Jobs: jobs}
		if len(jobs) == limit {
			page.Next = jobs[len(jobs)-1].ID
		}
		return page, nil
	}
	scanned, oldest, hits, err := s.textWindow(ctx, f, TextScanWindow, limit)
	if err != nil {
		return JobPage{}, fmt.Errorf("search jobs: %w", err)
	}
	page := JobPage{Scanned: scanned}
	switch {
	case len(hits) == limit:
		page.Next = hits[len(hits)-1]
	case scanned == TextScanWindow:
		page.Next = oldest
	}
	if len(hits) > 0 {
		rows, err := s.q.DashJobsByIDs(ctx, idStrings(hits))
		if err != nil {
			return JobPage{}, fmt.Errorf("read found jobs: %w", mapErr(err))
		}
		byID := make(map[uuid.UUID]job.Job, len(rows))
		for _, r := range rows {
			byID[r.JobID] = jobFromRow(r)
		}
		for _, id := range hits {
			if j, ok := byID[id]; ok {
				page.Jobs = append(page.Jobs, j)
			}
		}
	}
	return page, nil
}

// MatchingJobIDs returns up to max ids of jobs matching f, newest first. A
// text filter scans windows of TextScanWindow rows until max ids are found
// or maxScan rows were looked at.
func (s *Store) MatchingJobIDs(ctx context.Context, f JobFilter, max, maxScan int) ([]uuid.UUID, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if f.Text == "" {
		sql, args := f.newest("job_id", max, nil)
		rows, err := s.pool.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
		if err != nil {
			return nil, fmt.Errorf("match jobs: %w", mapErr(err))
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return nil, fmt.Errorf("match jobs: %w", mapErr(err))
		}
		return ids, nil
	}
	var out []uuid.UUID
	for scannedTotal := 0; len(out) < max && scannedTotal < maxScan; {
		scanned, oldest, hits, err := s.textWindow(ctx, f, TextScanWindow, max-len(out))
		if err != nil {
			return nil, fmt.Errorf("match jobs: %w", err)
		}
		out = append(out, hits...)
		scannedTotal += scanned
		if scanned < TextScanWindow {
			break
		}
		f.Before = oldest
	}
	return out, nil
}

func (s *Store) textWindow(ctx context.Context, f JobFilter, window, limit int) (scanned int, oldest uuid.UUID, hits []uuid.UUID, err error) {
	inner, args := f.newest("job_id", window, func(next int) (string, []any) {
		return fmt.Sprintf(fragText, next) + " AS hit", []any{likePattern(f.Text)}
	})
	sql := fmt.Sprintf(listTextWindow, inner, limit)
	var old *uuid.UUID
	err = s.pool.QueryRow(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...).Scan(&scanned, &old, &hits)
	if err != nil {
		return 0, uuid.Nil, nil, mapErr(err)
	}
	if old != nil {
		oldest = *old
	}
	return scanned, oldest, hits, nil
}

// queryJobs runs a list statement in exec mode and scans full job rows.
func (s *Store) queryJobs(ctx context.Context, sql string, args ...any) ([]job.Job, error) {
	rows, err := s.pool.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []job.Job
	for rows.Next() {
		var r dbsqlc.DlJob
		if err := rows.Scan(&r.JobID, &r.Queue, &r.Task, &r.Args, &r.IdempotencyKey, &r.LockKey, &r.PartitionKey,
			&r.Priority, &r.AvailableAt, &r.Status, &r.Attempt, &r.MaxAttempts, &r.LeaseTtlSec, &r.LeaseExpiresAt,
			&r.HeartbeatAt, &r.CancelRequested, &r.Progress, &r.Error, &r.Producer, &r.ConsumerGroup, &r.CreatedAt,
			&r.StartedAt, &r.FinishedAt, &r.Result, &r.WorkerID); err != nil {
			return nil, mapErr(err)
		}
		out = append(out, jobFromRow(r))
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err)
	}
	return out, nil
}
