-- What the handler API and the built-in pipelines write: checkpoints and
-- handler events during a run (fenced on attempt and worker_id like the
-- transitions in jobs.sql), coalesced inserts, the final-failure alert
-- outbox and retention.

-- name: JobCheckpointSave :one
-- Stores a running attempt's resume point. No row: the attempt is no longer
-- this worker's (reaped, taken over, handed back).
UPDATE dl_jobs SET checkpoint = @checkpoint
WHERE job_id = @job_id AND attempt = @attempt AND worker_id = @worker_id::text AND status = 'running'
RETURNING job_id;

-- name: EventInsertFenced :one
-- Appends one handler event (e.g. delivery_attempt) to a running attempt's
-- journal; no row when the attempt is no longer this worker's.
INSERT INTO dl_job_events (job_id, queue, kind, payload)
SELECT j.job_id, j.queue, @kind::text, @payload::jsonb
FROM dl_jobs j
WHERE j.job_id = @job_id AND j.attempt = @attempt AND j.worker_id = @worker_id::text AND j.status = 'running'
RETURNING event_id;

-- name: CoalesceLock :exec
-- Serializes coalesced inserts of one key until the transaction ends, so two
-- concurrent producers cannot both leave a queued job behind.
SELECT pg_advisory_xact_lock(hashtextextended('dl_coalesce:' || @coalesce_key::text, 0));

-- name: JobInsertCoalesced :one
-- JobInsert for a job with a coalesce_key: the new job supersedes every
-- queued (never a running) job with the same key in the same statement; they
-- become canceled with a 'superseded' event naming the new job. Nothing is
-- inserted or superseded when the idempotency_key exists.
WITH ins AS (
  INSERT INTO dl_jobs (job_id, queue, task, args, idempotency_key, lock_key, partition_key,
                       priority, available_at, max_attempts, lease_ttl_sec, producer, coalesce_key)
  VALUES (@job_id, @queue, @task, @args, sqlc.narg(idempotency_key), @lock_key, @partition_key,
          @priority, COALESCE(sqlc.narg(available_at)::timestamptz, now()), @max_attempts,
          @lease_ttl_sec, sqlc.narg(producer), @coalesce_key::text)
  ON CONFLICT (idempotency_key) DO NOTHING
  RETURNING job_id, queue, status, available_at, producer, coalesce_key
), sup AS (
  UPDATE dl_jobs j
  SET status = 'canceled', finished_at = now(), lease_expires_at = NULL,
      error = 'superseded by job ' || ins.job_id::text
  FROM ins
  WHERE j.coalesce_key = ins.coalesce_key AND j.status = 'queued' AND j.job_id <> ins.job_id
  RETURNING j.job_id, j.queue, ins.job_id AS by_job
), ev AS (
  INSERT INTO dl_job_events (job_id, queue, kind, payload)
  SELECT ins.job_id, ins.queue, 'queued',
         jsonb_strip_nulls(jsonb_build_object('producer', ins.producer, 'available_at', ins.available_at,
                                              'coalesce_key', ins.coalesce_key))
  FROM ins
  UNION ALL
  SELECT sup.job_id, sup.queue, 'superseded', jsonb_build_object('by', sup.by_job)
  FROM sup
), done_note AS (
  SELECT pg_notify('dl_job_done', string_agg(sup.job_id::text, ',')) FROM sup HAVING count(*) > 0
)
SELECT ins.job_id, ins.status, (SELECT count(*) FROM sup)::int AS superseded,
       (SELECT count(*) FROM done_note)::int AS announced
FROM ins;

-- name: AlertTake :many
-- Takes up to @max final-failure alerts out of the outbox. Rows another
-- replica is taking are skipped; the caller enqueues the webhook deliveries
-- in the same transaction, so each alert is handled exactly once.
DELETE FROM dl_alerts a
WHERE a.alert_id IN (SELECT x.alert_id FROM dl_alerts x ORDER BY x.alert_id LIMIT @max FOR UPDATE SKIP LOCKED)
RETURNING a.*;

-- name: JobDeleteFinished :one
-- Retention: deletes up to @max jobs that finished before @cutoff, with
-- their journal, in one short statement. Rows being changed right now (an
-- operator's retry) are skipped and re-checked under lock, so a queued or
-- running job is never deleted.
WITH doomed AS (
  SELECT d.job_id FROM dl_jobs d
  WHERE d.finished_at < @cutoff::timestamptz AND d.status IN ('succeeded', 'failed', 'canceled', 'lost')
  ORDER BY d.finished_at
  LIMIT @max
  FOR UPDATE SKIP LOCKED
), ev AS (
  DELETE FROM dl_job_events e WHERE e.job_id IN (SELECT doomed.job_id FROM doomed)
  RETURNING 1
), del AS (
  DELETE FROM dl_jobs j
  WHERE j.job_id IN (SELECT doomed.job_id FROM doomed)
    AND j.status IN ('succeeded', 'failed', 'canceled', 'lost')
  RETURNING 1
)
SELECT (SELECT count(*) FROM del)::bigint AS jobs, (SELECT count(*) FROM ev)::bigint AS events;

-- name: TargetColumns :many
-- The columns of an etl.load target table (ordinary or partitioned), with
-- their exact types; no rows when the table does not exist.
SELECT a.attname::text AS name, format_type(a.atttypid, a.atttypmod)::text AS type,
       a.attnotnull AS not_null, (a.attgenerated <> '' OR a.attidentity = 'a')::bool AS generated
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = @schema_name::text AND c.relname = @table_name::text AND c.relkind IN ('r', 'p')
  AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum;

-- name: TargetUniqueKeys :many
-- The column sets of a target table's unique indexes that ON CONFLICT can
-- infer (valid, not partial, no expressions).
SELECT array_agg(a.attname::text ORDER BY a.attname)::text[] AS columns
FROM pg_catalog.pg_index i
JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
WHERE n.nspname = @schema_name::text AND c.relname = @table_name::text
  AND i.indisunique AND i.indisvalid AND i.indpred IS NULL AND i.indexprs IS NULL
GROUP BY i.indexrelid;
