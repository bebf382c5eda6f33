-- name: EventListByJob :many
SELECT * FROM dl_job_events
WHERE job_id = @job_id AND event_id > @after
ORDER BY event_id
LIMIT @max;
