-- name: QueueList :many
SELECT * FROM dl_queues ORDER BY queue;

-- name: QueueSetPaused :one
-- Pauses or resumes a queue; resuming wakes its workers on every replica.
WITH up AS (
  INSERT INTO dl_queues (queue, paused, updated_by) VALUES (@queue, @paused, @by)
  ON CONFLICT (queue) DO UPDATE SET paused = EXCLUDED.paused, updated_at = now(), updated_by = EXCLUDED.updated_by
  RETURNING *
), wake AS (
  SELECT pg_notify('dl_jobs', up.queue) FROM up WHERE NOT up.paused
)
SELECT up.queue, up.paused, up.updated_at, up.updated_by, (SELECT count(*) FROM wake)::int AS woken FROM up;
