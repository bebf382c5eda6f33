-- name: TokenCreate :one
INSERT INTO dl_api_tokens (name, token_hash, role, created_by) VALUES (@name, @token_hash, @role, @created_by)
RETURNING token_id, created_at;

-- name: TokenGetByHash :one
-- Looks up an unrevoked token by the SHA-256 of its secret.
SELECT * FROM dl_api_tokens WHERE token_hash = @token_hash AND revoked_at IS NULL;

-- name: TokenList :many
SELECT * FROM dl_api_tokens ORDER BY revoked_at IS NOT NULL, created_at DESC, token_id DESC;

-- name: TokenRevoke :execrows
UPDATE dl_api_tokens SET revoked_at = now() WHERE token_id = @token_id AND revoked_at IS NULL;

-- name: TokenTouch :exec
-- Records use at most once a minute so a busy token does not write on every request.
UPDATE dl_api_tokens SET last_used_at = now()
WHERE token_id = @token_id AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');
