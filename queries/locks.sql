-- Advisory locks per lock_key, taken on the process's one lock-holding
-- session and held while the jobs run. Session locks are re-entrant, so the
-- worker also keeps its own set of held keys.

-- name: LockTryMany :many
SELECT t.lock_key::text AS lock_key, pg_try_advisory_lock(hashtext(t.lock_key)) AS acquired
FROM unnest(@lock_keys::text[]) WITH ORDINALITY AS t(lock_key, n)
ORDER BY t.n;

-- name: LockReleaseMany :exec
SELECT pg_advisory_unlock(hashtext(t.lock_key)) FROM unnest(@lock_keys::text[]) AS t(lock_key);
