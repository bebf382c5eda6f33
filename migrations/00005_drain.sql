-- A draining worker announces when its grace period ends, so the dashboard
-- can show a countdown.

-- +goose Up
ALTER TABLE dl_workers ADD COLUMN IF NOT EXISTS drain_deadline timestamptz;

-- +goose Down
ALTER TABLE dl_workers DROP COLUMN IF EXISTS drain_deadline;
