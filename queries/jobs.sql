-- Queue transitions of dl_jobs. Each is one statement that also writes its
-- journal rows (dl_job_events) set-wise, so a transition and its event commit
-- together. Writes by a worker are fenced on (attempt, worker_id): a worker
-- whose job was reaped or taken over cannot overwrite the new attempt.
-- Many-row writes of one process never touch the same rows at once (the
-- worker keeps their sets disjoint) and take ids sorted, so they cannot
-- deadlock each other.

-- name: JobInsert :one
-- Inserts a job unless its idempotency_key exists; returns nothing on a
-- duplicate (the caller then reads the existing job).
WITH ins AS (
  INSERT INTO dl_jobs (job_id, queue, task, args, idempotency_key, lock_key, partition_key,
                       priority, available_at, max_attempts, lease_ttl_sec, producer)
  VALUES (@job_id, @queue, @task, @args, sqlc.narg(idempotency_key), @lock_key, @partition_key,
          @priority, COALESCE(sqlc.narg(available_at)::timestamptz, now()), @max_attempts,
          @lease_ttl_sec, sqlc.narg(producer))
  ON CONFLICT (idempotency_key) DO NOTHING
  RETURNING job_id, queue, status, available_at, producer
), ev AS (
  INSERT INTO dl_job_events (job_id, queue, kind, payload)
  SELECT ins.job_id, ins.queue, 'queued',
         jsonb_strip_nulls(jsonb_build_object('producer', ins.producer, 'available_at', ins.available_at))
  FROM ins
)
SELECT ins.job_id, ins.status FROM ins;

-- name: JobInsertMany :many
-- Inserts a batch of jobs in one statement (one notification per queue, not
-- per row); rows whose idempotency_key exists are skipped. Empty strings
-- stand for absent optional values (no available_at: now; no producer: NULL).
WITH input AS (
  SELECT unnest(@job_ids::uuid[]) AS job_id,
         unnest(@queues::text[]) AS queue,
         unnest(@tasks::text[]) AS task,
         unnest(@args::text[]) AS args,
         unnest(@idempotency_keys::text[]) AS idempotency_key,
         unnest(@lock_keys::text[]) AS lock_key,
         unnest(@partition_keys::text[]) AS partition_key,
         unnest(@priorities::int[]) AS priority,
         unnest(@available_ats::text[]) AS available_at,
         unnest(@max_attempts::int[]) AS max_attempts,
         unnest(@lease_ttls::int[]) AS lease_ttl_sec,
         unnest(@producers::text[]) AS producer
), ins AS (
  INSERT INTO dl_jobs (job_id, queue, task, args, idempotency_key, lock_key, partition_key, priority,
                       available_at, max_attempts, lease_ttl_sec, producer)
  SELECT i.job_id, i.queue, i.task, i.args::jsonb, NULLIF(i.idempotency_key, ''), i.lock_key,
         i.partition_key, i.priority, COALESCE(NULLIF(i.available_at, '')::timestamptz, now()),
         i.max_attempts, i.lease_ttl_sec, NULLIF(i.producer, '')
  FROM input i
  ON CONFLICT (idempotency_key) DO NOTHING
  RETURNING dl_jobs.job_id, dl_jobs.queue, dl_jobs.producer, dl_jobs.available_at
), ev AS (
  INSERT INTO dl_job_events (job_id, queue, kind, payload)
  SELECT ins.job_id, ins.queue, 'queued',
         jsonb_strip_nulls(jsonb_build_object('producer', ins.producer, 'available_at', ins.available_at))
  FROM ins
)
SELECT ins.job_id FROM ins;

-- name: JobGetManyByIdempotencyKey :many
SELECT job_id, idempotency_key, status FROM dl_jobs WHERE idempotency_key = ANY (@idempotency_keys::text[]);

-- name: JobGet :one
SELECT * FROM dl_jobs WHERE job_id = @job_id;

-- name: JobGetByIdempotencyKey :one
SELECT job_id, status FROM dl_jobs WHERE idempotency_key = @idempotency_key;

-- name: JobClaim :many
-- Claims up to @max ready jobs of a queue in (priority, created_at) order. A
-- job is skipped when its lock_key is held by a running job or when an
-- earlier ready job of the same lock_key exists (locked or not), so one key's
-- jobs start one at a time and in order, and a busy key costs no churn. The
-- update side finds its rows by primary key whatever the planner thinks of
-- the candidate count.
WITH candidates AS (
  SELECT c.job_id FROM dl_jobs c
  -- "IS TRUE" keeps the planner from using available_at as an index
  -- condition: on a table without statistics (fresh, or after a bulk load)
  -- it would pick the seed's (queue, available_at) index and sort the whole
  -- backlog instead of walking ix_dl_jobs_claim_order and stopping early.
  WHERE c.queue = @queue AND c.status = 'queued' AND (c.available_at <= now()) IS TRUE
    AND NOT EXISTS (SELECT 1 FROM dl_queues q WHERE q.queue = @queue AND q.paused)
    AND NOT EXISTS (SELECT 1 FROM dl_jobs r WHERE r.lock_key = c.lock_key AND r.status = 'running')
    AND NOT EXISTS (
      SELECT 1 FROM dl_jobs e
      WHERE e.lock_key = c.lock_key AND e.status = 'queued' AND e.available_at <= now()
        AND (e.priority, e.created_at, e.job_id) < (c.priority, c.created_at, c.job_id))
  ORDER BY c.priority, c.created_at, c.job_id
  LIMIT @max
  FOR UPDATE SKIP LOCKED
), claimed AS (
  UPDATE dl_jobs j
  SET status = 'running', attempt = j.attempt + 1, started_at = COALESCE(j.started_at, now()),
      heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => j.lease_ttl_sec),
      worker_id = @worker_id::text
  -- The candidates are locked by this statement: no status recheck needed,
  -- and without one the update is a plain primary-key lookup on any plan.
  WHERE j.job_id = ANY (ARRAY(SELECT candidates.job_id FROM candidates))
  RETURNING j.job_id, j.queue, j.task, j.args, j.lock_key, j.attempt, j.max_attempts,
            j.lease_ttl_sec, j.progress, j.created_at, j.available_at, j.checkpoint
), ev AS (
  INSERT INTO dl_job_events (job_id, queue, kind, payload)
  SELECT claimed.job_id, claimed.queue, 'picked',
         jsonb_build_object('attempt', claimed.attempt, 'worker', @worker_id::text)
  FROM claimed
)
SELECT * FROM claimed ORDER BY claimed.created_at, claimed.job_id;

-- name: JobRequeueMany :many
-- Hands running jobs back to the queue without charging the attempt they
-- were claimed with: after a lock conflict (kind lock_conflict, with a
-- delay) or at the end of a shutdown grace period (kind requeue).
WITH input AS (
  SELECT unnest(@job_ids::uuid[]) AS job_id, unnest(@attempts::int[]) AS attempt
), req AS (
  UPDATE dl_jobs j
  SET status = 'queued', attempt = j.attempt - 1,
      available_at = now() + make_interval(secs => @delay_sec::float8),
      lease_expires_at = NULL
  FROM input i
  WHERE j.job_id = i.job_id AND j.attempt = i.attempt AND j.worker_id = @worker_id::text
    AND j.status = 'running'
  RETURNING j.job_id, j.queue, j.attempt
), ev AS (
  INSERT INTO dl_job_events (job_id, queue, kind, payload)
  SELECT req.job_id, req.queue, @kind::text,
         jsonb_build_object('attempt', req.attempt + 1, 'worker', @worker_id::text,
                            'reason', @reason::text, 'retry_in_sec', @delay_sec::float8)
  FROM req
)
SELECT req.job_id FROM req;

-- name: JobHeartbeatMany :many
-- One statement per tick for every job a process runs: extends the leases
-- still held by this worker and attempt, and returns them with their cancel
-- flag. A job missing from the result is no longer ours.
WITH input AS (
  SELECT unnest(@job_ids::uuid[]) AS job_id, unnest(@attempts::int[]) AS attempt
), hb AS (
  UPDATE dl_jobs j
  SET heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => j.lease_ttl_sec)
  FROM input i
  WHERE j.job_id = i.job_id AND j.attempt = i.attempt AND j.worker_id = @worker_id::text
    AND j.status = 'running'
  RETURNING j.job_id, j.queue, j.attempt, j.cancel_requested
), ev AS (
  INSERT INTO dl_job_events (job_id, queue, kind, payload)
  SELECT hb.job_id, hb.queue, 'heartbeat', jsonb_build_object('attempt', hb.attempt, 'worker', @worker_id::text)
  FROM hb
)
SELECT hb.job_id, hb.cancel_requested FROM hb;

-- name: JobProgressMany :exec
-- Writes the latest progress of running jobs, fenced like the heartbeat.
WITH input AS (
  SELECT unnest(@job_ids::uuid[]) AS job_id,
         unnest(@attempts::int[]) AS attempt,
         unnest(@progress::text[]) AS progress
), pr AS (
  UPDATE dl_jobs j SET progress = i.progress::jsonb
  FROM input i
  WHERE j.job_id = i.job_id AND j.attempt = i.attempt AND j.worker_id = @worker_id::text
    AND j.status = 'running'
  RETURNING j.job_id, j.queue, j.progress
)
INSERT INTO dl_job_events (job_id, queue, kind, payload)
SELECT pr.job_id, pr.queue, 'progress', pr.progress FROM pr;

-- name: JobFinishMany :many
-- Records the outcome of many attempts at once. Outcome 'succeeded',
-- 'canceled', 'failed' (permanent) or 'retry' (back to queued after
-- backoff_ms while attempts remain, else failed). Also wakes, on every
-- replica, the queues where a job was waiting on a lock_key just released.
WITH input AS (
  SELECT unnest(@job_ids::uuid[]) AS job_id,
         unnest(@attempts::int[]) AS attempt,
         unnest(@outcomes::text[]) AS outcome,
         unnest(@errors::text[]) AS error,
         unnest(@backoff_ms::bigint[]) AS backoff_ms,
         unnest(@results::text[]) AS result,
         unnest(@progress::text[]) AS progress
), fin AS (
  UPDATE dl_jobs j
  SET status = (CASE
        WHEN i.outcome = 'succeeded' THEN 'succeeded'
        WHEN i.outcome = 'canceled' THEN 'canceled'
        WHEN i.outcome = 'retry' AND j.attempt < j.max_attempts THEN 'queued'
        ELSE 'failed' END)::dl_status,
      available_at = CASE WHEN i.outcome = 'retry' AND j.attempt < j.max_attempts
        THEN now() + make_interval(secs => i.backoff_ms / 1000.0) ELSE j.available_at END,
      finished_at = CASE WHEN i.outcome = 'retry' AND j.attempt < j.max_attempts THEN NULL ELSE now() END,
      lease_expires_at = NULL,
      error = CASE WHEN i.outcome = 'succeeded' THEN NULL ELSE COALESCE(NULLIF(i.error, ''), j.error) END,
      result = COALESCE(NULLIF(i.result, '')::jsonb, j.result),
      progress = COALESCE(NULLIF(i.progress, '')::jsonb, j.progress)
  FROM input i
  WHERE j.job_id = i.job_id AND j.attempt = i.attempt AND j.worker_id = @worker_id::text
    AND j.status = 'running'
  RETURNING j.job_id, j.queue, j.lock_key, j.status, j.attempt, j.available_at, j.error
), ev AS (
  INSERT INTO dl_job_events (job_id, queue, kind, payload)
  SELECT fin.job_id, fin.queue,
         CASE fin.status WHEN 'succeeded' THEN 'done' WHEN 'canceled' THEN 'canceled' ELSE 'failed' END,
         jsonb_strip_nulls(jsonb_build_object(
           'attempt', fin.attempt, 'worker', @worker_id::text, 'error', fin.error,
           'retry_at', CASE WHEN fin.status = 'queued' THEN fin.available_at END,
           'final', fin.status <> 'queued'))
  FROM fin
), wake AS (
  SELECT pg_notify('dl_jobs', w.queue)
  FROM (SELECT DISTINCT fin.queue FROM fin
        WHERE EXISTS (SELECT 1 FROM dl_jobs q
                      WHERE q.lock_key = fin.lock_key AND q.status = 'queued' AND q.available_at <= now())) w
), done_note AS (
  -- One notification per statement naming the jobs that reached a final
  -- status, for API waiters (at most 200 ids keep it under 8000 bytes).
  SELECT pg_notify('dl_job_done', string_agg(fin.job_id::text, ',')) FROM fin
  WHERE fin.status <> 'queued' HAVING count(*) > 0
)
SELECT fin.job_id, fin.queue, fin.status, fin.attempt,
       (SELECT count(*) FROM wake)::int AS woken, (SELECT count(*) FROM done_note)::int AS announced
FROM fin;

-- name: JobRescueExpired :many
-- The reaper: running jobs whose lease expired go back to queued, or to lost
-- when no attempts remain (at most 200 per call, see done_note). Rows being heartbeated right now are skipped, and
-- a lease extended after this statement's snapshot is re-checked on lock.
WITH expired AS (
  SELECT x.job_id FROM dl_jobs x
  WHERE x.status = 'running' AND x.lease_expires_at < now()
  ORDER BY x.lease_expires_at
  LIMIT @max
  FOR UPDATE SKIP LOCKED
), res AS (
  UPDATE dl_jobs j
  SET status = (CASE WHEN j.attempt >= j.max_attempts THEN 'lost' ELSE 'queued' END)::dl_status,
      available_at = now(), lease_expires_at = NULL,
      finished_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
      error = CASE WHEN j.attempt >= j.max_attempts
        THEN 'lease expired on the last attempt: the worker stopped heartbeating' ELSE j.error END
  WHERE j.job_id = ANY (ARRAY(SELECT expired.job_id FROM expired)) AND j.status = 'running'
  RETURNING j.job_id, j.queue, j.status, j.attempt, j.worker_id
), ev AS (
  INSERT INTO dl_job_events (job_id, queue, kind, payload)
  SELECT res.job_id, res.queue, CASE WHEN res.status = 'lost' THEN 'lost' ELSE 'reaped' END,
         jsonb_strip_nulls(jsonb_build_object('attempt', res.attempt, 'worker', res.worker_id,
                                              'reaper', @reaper::text))
  FROM res
), done_note AS (
  SELECT pg_notify('dl_job_done', string_agg(res.job_id::text, ',')) FROM res
  WHERE res.status = 'lost' HAVING count(*) > 0
)
SELECT res.job_id, res.queue, res.status, (SELECT count(*) FROM done_note)::int AS announced FROM res;

-- name: JobCancel :one
-- Requests cancellation. A queued job is canceled at once; a running one is
-- flagged and its worker told through the dl_cancel channel.
WITH upd AS (
  UPDATE dl_jobs j
  SET cancel_requested = true,
      status = (CASE WHEN j.status = 'queued' THEN 'canceled' ELSE j.status END)::dl_status,
      finished_at = CASE WHEN j.status = 'queued' THEN now() ELSE j.finished_at END
  WHERE j.job_id = @job_id AND j.status IN ('queued', 'running')
  RETURNING j.job_id, j.queue, j.status, j.attempt
), ev AS (
  INSERT INTO dl_job_events (job_id, queue, kind, payload)
  SELECT upd.job_id, upd.queue, CASE WHEN upd.status = 'canceled' THEN 'canceled' ELSE 'cancel_requested' END,
         jsonb_build_object('attempt', upd.attempt, 'by', @by::text)
  FROM upd
), push AS (
  SELECT pg_notify(CASE WHEN upd.status = 'running' THEN 'dl_cancel' ELSE 'dl_job_done' END, upd.job_id::text)
  FROM upd
)
SELECT upd.job_id, upd.status, (SELECT count(*) FROM push)::int AS pushed FROM upd;

-- name: JobRetry :one
-- Puts a failed, canceled or lost job back to queued now, extending its
-- attempt budget by @extra_attempts (the attempt counter keeps counting so
-- that writes of an older attempt stay fenced out).
WITH upd AS (
  UPDATE dl_jobs j
  SET status = 'queued', available_at = now(), cancel_requested = false, finished_at = NULL,
      lease_expires_at = NULL, max_attempts = j.attempt + @extra_attempts::int
  WHERE j.job_id = @job_id AND j.status IN ('failed', 'canceled', 'lost')
  RETURNING j.job_id, j.queue, j.status, j.attempt, j.max_attempts
), ev AS (
  INSERT INTO dl_job_events (job_id, queue, kind, payload)
  SELECT upd.job_id, upd.queue, 'retried',
         jsonb_build_object('by', @by::text, 'attempt', upd.attempt, 'max_attempts', upd.max_attempts)
  FROM upd
)
SELECT upd.job_id, upd.status FROM upd;

-- name: JobNextAvailable :one
-- When the next queued job of a queue becomes ready (no row when none is
-- queued); an index probe of the seed's ix_dl_jobs_claim.
SELECT available_at FROM dl_jobs
WHERE queue = @queue AND status = 'queued'
ORDER BY available_at
LIMIT 1;

-- name: JobCountByQueueStatus :many
SELECT queue, status, count(*) AS n FROM dl_jobs GROUP BY queue, status;

-- name: JobOldestQueued :many
SELECT queue, min(created_at)::timestamptz AS oldest FROM dl_jobs WHERE status = 'queued' GROUP BY queue;
