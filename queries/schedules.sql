-- Periodic jobs (package schedule). Every replica runs the same schedules;
-- one job per tick comes from the tick's idempotency key, so the replicas'
-- races are harmless.

-- name: ScheduleUpsert :exec
-- Records a schedule's definition as configured on this replica.
INSERT INTO dl_schedules (name, cron, queue, task, args, lock_key, next_tick, updated_at)
VALUES (@name, @cron, @queue, @task, @args, @lock_key, @next_tick, now())
ON CONFLICT (name) DO UPDATE
SET cron = EXCLUDED.cron, queue = EXCLUDED.queue, task = EXCLUDED.task, args = EXCLUDED.args,
    lock_key = EXCLUDED.lock_key, next_tick = EXCLUDED.next_tick, updated_at = now();

-- name: ScheduleGet :one
SELECT * FROM dl_schedules WHERE name = @name;

-- name: ScheduleList :many
SELECT * FROM dl_schedules ORDER BY name;

-- name: ScheduleFire :one
-- Enqueues the job of one tick unless a replica already did (the tick's
-- idempotency key), and moves the schedule's last and next tick forward
-- (never back, whichever replica comes last).
WITH ins AS (
  INSERT INTO dl_jobs (job_id, queue, task, args, idempotency_key, lock_key, max_attempts,
                       lease_ttl_sec, producer)
  VALUES (@job_id, @queue, @task, @args, @idempotency_key::text, @lock_key, @max_attempts,
          @lease_ttl_sec, @producer::text)
  ON CONFLICT (idempotency_key) DO NOTHING
  RETURNING job_id, queue
), ev AS (
  INSERT INTO dl_job_events (job_id, queue, kind, payload)
  SELECT ins.job_id, ins.queue, 'queued',
         jsonb_build_object('producer', @producer::text, 'schedule', @name::text, 'tick', @tick::timestamptz)
  FROM ins
), upd AS (
  UPDATE dl_schedules s
  SET last_tick = GREATEST(s.last_tick, @tick::timestamptz),
      last_job_id = CASE WHEN s.last_tick IS NULL OR s.last_tick <= @tick::timestamptz
                         THEN COALESCE((SELECT ins.job_id FROM ins), s.last_job_id) ELSE s.last_job_id END,
      next_tick = GREATEST(s.next_tick, @next_tick::timestamptz)
  WHERE s.name = @name
  RETURNING 1
)
-- The nil uuid stands for "another replica enqueued this tick".
SELECT COALESCE((SELECT ins.job_id FROM ins), '00000000-0000-0000-0000-000000000000'::uuid)::uuid AS job_id,
       (SELECT count(*) FROM upd)::int AS updated;
