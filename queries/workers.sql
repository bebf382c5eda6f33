-- name: WorkerUpsert :exec
INSERT INTO dl_workers (worker_id, host, pid, version, queues, running, draining, drain_deadline)
VALUES (@worker_id, @host, @pid, @version, @queues, @running, @draining, sqlc.narg(drain_deadline))
ON CONFLICT (worker_id) DO UPDATE
SET queues = EXCLUDED.queues, running = EXCLUDED.running, draining = EXCLUDED.draining,
    drain_deadline = EXCLUDED.drain_deadline, heartbeat_at = now();

-- name: WorkerDelete :exec
DELETE FROM dl_workers WHERE worker_id = @worker_id;

-- name: WorkerList :many
-- Workers seen within @stale_sec seconds.
SELECT * FROM dl_workers WHERE heartbeat_at > now() - make_interval(secs => @stale_sec::float8) ORDER BY worker_id;

-- name: WorkerDeleteStale :exec
DELETE FROM dl_workers WHERE heartbeat_at < now() - make_interval(secs => @stale_sec::float8);
