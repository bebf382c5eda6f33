-- Reads and bulk transitions of the operations dashboard. The jobs list with
-- its filter combinations is built from fixed fragments in
-- internal/store/dashboard_list.go (one statement per combination, so each
-- gets its own plan); everything else lives here.

-- name: DashCountByQueueStatus :many
-- Counts by queue and status for the background counts cache (one query per
-- process every second or two, served to every viewer; never per request).
SELECT queue, status, count(*) AS n FROM dl_jobs GROUP BY queue, status;

-- name: DashOldestQueued :many
-- When the longest-waiting queued job of each queue became ready: one probe
-- per queue of the seed's ix_dl_jobs_claim (queue, available_at, ...).
SELECT s.queue, s.oldest FROM (
  SELECT q.queue::text AS queue,
         (SELECT min(j.available_at) FROM dl_jobs j
          WHERE j.queue = q.queue AND j.status = 'queued')::timestamptz AS oldest
  FROM unnest(@queues::text[]) AS q(queue)
) s WHERE s.oldest IS NOT NULL;

-- name: DashThroughput :many
-- Jobs that reached a final status per queue and minute in [since, until),
-- from ix_dl_jobs_finished.
SELECT queue, date_trunc('minute', finished_at)::timestamptz AS minute, count(*) AS n
FROM dl_jobs
WHERE finished_at >= @since::timestamptz AND finished_at < @until::timestamptz
GROUP BY queue, minute;

-- name: DashJobsByIDs :many
-- Ids travel as text: pgx encodes a []uuid.UUID element by element through
-- driver.Valuer and reflection, many times slower for the live hub's
-- thousands of ids per second.
SELECT * FROM dl_jobs WHERE job_id = ANY ((@job_ids::text[])::uuid[]);

-- name: DashJobRowsByIDs :many
-- What a jobs-list row shows, without args and result, and the row
-- version (xmin changes with every update of the row), so the live hub
-- skips rows that did not change without comparing them.
SELECT job_id, queue, task, lock_key, status, attempt, max_attempts, cancel_requested, progress, error,
       created_at, started_at, finished_at, xmin::text::bigint AS version
FROM dl_jobs WHERE job_id = ANY ((@job_ids::text[])::uuid[]);

-- name: DashEventsTail :many
-- The newest @max events of a job before @before (oldest first).
SELECT t.* FROM (
  SELECT * FROM dl_job_events e
  WHERE e.job_id = @job_id AND e.event_id < @before
  ORDER BY e.event_id DESC
  LIMIT @max
) t ORDER BY t.event_id;

-- name: DashEventsAfterMany :many
-- New events of many jobs at once, each after its own cursor: one index
-- probe of ix_dl_job_events_job per job (at most @per_job each).
WITH c AS (
  SELECT unnest((@job_ids::text[])::uuid[]) AS job_id, unnest(@afters::bigint[]) AS after
)
SELECT e.* FROM c
CROSS JOIN LATERAL (
  SELECT * FROM dl_job_events x
  WHERE x.job_id = c.job_id AND x.event_id > c.after
  ORDER BY x.event_id
  LIMIT @per_job
) e
ORDER BY e.job_id, e.event_id;

-- name: DashWaitFacts :one
-- What can keep a queued job from running, in one round trip: its queue is
-- paused, its lock_key is held by a running job, an earlier ready job of the
-- same key goes first, how many ready jobs precede it in its queue (bounded),
-- and how many live workers serve the queue.
SELECT
  COALESCE((SELECT q.paused FROM dl_queues q WHERE q.queue = @queue::text), false)::bool AS paused,
  -- The nil UUID stands for "none" (sqlc cannot type a nullable subquery).
  COALESCE((SELECT r.job_id FROM dl_jobs r
   WHERE r.lock_key = @lock_key::text AND r.status = 'running' AND r.job_id <> @job_id::uuid
   LIMIT 1), '00000000-0000-0000-0000-000000000000')::uuid AS holder,
  COALESCE((SELECT e.job_id FROM dl_jobs e
   WHERE e.lock_key = @lock_key::text AND e.status = 'queued' AND e.available_at <= now()
     AND (e.priority, e.created_at, e.job_id) < (@priority::int, @created_at::timestamptz, @job_id::uuid)
   ORDER BY e.priority, e.created_at, e.job_id
   LIMIT 1), '00000000-0000-0000-0000-000000000000')::uuid AS earlier,
  (SELECT count(*) FROM (
     SELECT 1 FROM dl_jobs a
     WHERE a.queue = @queue::text AND a.status = 'queued' AND a.available_at <= now()
       AND (a.priority, a.created_at, a.job_id) < (@priority::int, @created_at::timestamptz, @job_id::uuid)
     LIMIT 1000) x)::int AS ahead,
  (SELECT count(*) FROM dl_workers w
   WHERE w.heartbeat_at > now() - make_interval(secs => @stale_sec::float8)
     AND w.queues @> jsonb_build_array(jsonb_build_object('queue', @queue::text)))::int AS workers;

-- name: DashLockHolders :many
-- Running jobs (each holds its lock_key) with how many jobs wait on the key
-- (bounded count). Running jobs are bounded by the fleet's worker slots.
SELECT h.lock_key, h.job_id, h.queue, h.task, h.started_at, h.heartbeat_at, h.worker_id, h.progress,
       (SELECT count(*) FROM (
          SELECT 1 FROM dl_jobs w WHERE w.lock_key = h.lock_key AND w.status = 'queued' LIMIT 1000) c)::int AS waiting
FROM dl_jobs h
WHERE h.status = 'running'
ORDER BY h.started_at, h.job_id
LIMIT @max;

-- name: DashLockWaiters :many
-- The first @per_key waiting jobs of each key in claim order.
SELECT w.job_id, w.lock_key, w.queue, w.task, w.priority, w.created_at, w.available_at
FROM unnest(@lock_keys::text[]) AS k(lock_key)
CROSS JOIN LATERAL (
  SELECT x.job_id, x.lock_key, x.queue, x.task, x.priority, x.created_at, x.available_at
  FROM dl_jobs x
  WHERE x.lock_key = k.lock_key AND x.status = 'queued'
  ORDER BY x.priority, x.created_at, x.job_id
  LIMIT @per_key
) w;

-- name: JobCancelMany :many
-- Bulk JobCancel: queued jobs are canceled at once, running ones flagged and
-- their workers told (dl_cancel, one id per notification as the worker
-- expects). Rows another transaction holds right now (a worker claiming or
-- finishing them) are skipped rather than waited for, so a bulk action never
-- deadlocks with a worker's batch; the caller retries the skipped ones.
WITH target AS (
  SELECT t.job_id FROM dl_jobs t
  WHERE t.job_id = ANY (@job_ids::uuid[]) AND t.status IN ('queued', 'running')
  ORDER BY t.job_id
  FOR UPDATE SKIP LOCKED
), upd AS (
  UPDATE dl_jobs j
  SET cancel_requested = true,
      status = (CASE WHEN j.status = 'queued' THEN 'canceled' ELSE j.status END)::dl_status,
      finished_at = CASE WHEN j.status = 'queued' THEN now() ELSE j.finished_at END
  WHERE j.job_id = ANY (ARRAY(SELECT target.job_id FROM target)) AND j.status IN ('queued', 'running')
  RETURNING j.job_id, j.queue, j.status, j.attempt
), ev AS (
  INSERT INTO dl_job_events (job_id, queue, kind, payload)
  SELECT upd.job_id, upd.queue, CASE WHEN upd.status = 'canceled' THEN 'canceled' ELSE 'cancel_requested' END,
         jsonb_build_object('attempt', upd.attempt, 'by', @by::text, 'bulk', true)
  FROM upd
), push AS (
  SELECT pg_notify('dl_cancel', upd.job_id::text) FROM upd WHERE upd.status = 'running'
), done_note AS (
  -- Final ids for API waiters, at most 200 per notification (8000 bytes).
  SELECT pg_notify('dl_job_done', string_agg(d.job_id::text, ','))
  FROM (SELECT upd.job_id, (row_number() OVER ()) / 200 AS grp FROM upd WHERE upd.status = 'canceled') d
  GROUP BY d.grp
)
SELECT upd.job_id, upd.status,
       (SELECT count(*) FROM push)::int AS pushed, (SELECT count(*) FROM done_note)::int AS announced
FROM upd;

-- name: JobRetryMany :many
-- Bulk JobRetry: failed, canceled and lost jobs go back to queued now with
-- their attempt budget extended by their own max_attempts (as JobRetry with
-- no extra_attempts). Locked rows are skipped as in JobCancelMany. The
-- update trigger wakes the queues' workers.
WITH target AS (
  SELECT t.job_id FROM dl_jobs t
  WHERE t.job_id = ANY (@job_ids::uuid[]) AND t.status IN ('failed', 'canceled', 'lost')
  ORDER BY t.job_id
  FOR UPDATE SKIP LOCKED
), upd AS (
  UPDATE dl_jobs j
  SET status = 'queued', available_at = now(), cancel_requested = false, finished_at = NULL,
      lease_expires_at = NULL, max_attempts = j.attempt + GREATEST(j.max_attempts, 1)
  WHERE j.job_id = ANY (ARRAY(SELECT target.job_id FROM target)) AND j.status IN ('failed', 'canceled', 'lost')
  RETURNING j.job_id, j.queue, j.status, j.attempt, j.max_attempts
), ev AS (
  INSERT INTO dl_job_events (job_id, queue, kind, payload)
  SELECT upd.job_id, upd.queue, 'retried',
         jsonb_build_object('by', @by::text, 'attempt', upd.attempt, 'max_attempts', upd.max_attempts, 'bulk', true)
  FROM upd
)
SELECT upd.job_id, upd.status FROM upd;
