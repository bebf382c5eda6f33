-- name: EventListByJob :many
SELECT * FROM dl_job_events
WHERE job_id = @job_id AND event_id > @after
ORDER BY event_id
LIMIT @max;

-- name: EventListRange :many
-- Events with @after < event_id <= @up_to in id order: the journal tailer's
-- read (primary key range scan).
SELECT * FROM dl_job_events
WHERE event_id > @after AND event_id <= @up_to
ORDER BY event_id
LIMIT @max;

-- name: EventMaxID :one
SELECT COALESCE(max(event_id), 0)::bigint AS max_id FROM dl_job_events;
