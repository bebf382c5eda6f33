-- name: UserCreate :one
INSERT INTO dl_users (name, password_hash, role) VALUES (@name, @password_hash, @role)
RETURNING user_id;

-- name: UserUpsert :one
-- Creates a user or resets its password and role and enables it (the admin
-- from the environment, re-applied at every start).
INSERT INTO dl_users (name, password_hash, role) VALUES (@name, @password_hash, @role)
ON CONFLICT (name) DO UPDATE SET password_hash = EXCLUDED.password_hash, role = EXCLUDED.role, disabled = false
RETURNING user_id, (xmax = 0)::boolean AS created;

-- name: UserGet :one
SELECT * FROM dl_users WHERE user_id = @user_id;

-- name: UserGetByName :one
SELECT * FROM dl_users WHERE name = @name;

-- name: UserList :many
SELECT * FROM dl_users ORDER BY name;

-- name: UserCount :one
SELECT count(*) FROM dl_users;

-- name: UserSetRole :execrows
UPDATE dl_users SET role = @role WHERE user_id = @user_id;

-- name: UserSetDisabled :execrows
UPDATE dl_users SET disabled = @disabled WHERE user_id = @user_id;

-- name: UserSetPassword :execrows
UPDATE dl_users SET password_hash = @password_hash WHERE user_id = @user_id;

-- name: UserLockAdmins :execrows
-- Serializes changes that could leave no enabled admin.
SELECT user_id FROM dl_users WHERE role = 'admin' AND NOT disabled FOR UPDATE;

-- name: UserCountEnabledAdmins :one
SELECT count(*) FROM dl_users WHERE role = 'admin' AND NOT disabled;
