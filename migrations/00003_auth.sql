-- Users of the dashboard and API tokens for automation (SPEC §9). Both carry
-- one of the roles viewer < operator < admin. Token secrets are never stored:
-- only their SHA-256, which is enough because a secret is 256 random bits (a
-- slow KDF protects low-entropy passwords, not random keys).

-- +goose Up
CREATE TABLE IF NOT EXISTS dl_users (
  user_id       bigserial PRIMARY KEY,
  name          text NOT NULL UNIQUE,
  password_hash text NOT NULL,
  role          text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
  created_at    timestamptz NOT NULL DEFAULT now(),
  disabled      boolean NOT NULL DEFAULT false
);

CREATE TABLE IF NOT EXISTS dl_api_tokens (
  token_id     bigserial PRIMARY KEY,
  name         text NOT NULL,
  token_hash   bytea NOT NULL UNIQUE,
  role         text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
  created_by   text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at   timestamptz
);

-- +goose Down
DROP TABLE IF EXISTS dl_api_tokens;
DROP TABLE IF EXISTS dl_users;
