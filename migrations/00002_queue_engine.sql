-- What the queue engine adds to the seed schema: a result column and the
-- claiming worker, indexes in the claim's own order, cheaper notifications,
-- queue settings and the live worker registry.

-- +goose Up
ALTER TABLE dl_jobs ADD COLUMN IF NOT EXISTS result jsonb;
ALTER TABLE dl_jobs ADD COLUMN IF NOT EXISTS worker_id text;

-- The claim scans queued jobs of one queue in (priority, created_at) order and
-- stops after the batch: this index is that order, so the claim never sorts
-- the backlog. The seed's ix_dl_jobs_claim leads with available_at and stays
-- for the delayed-job lookups.
CREATE INDEX IF NOT EXISTS ix_dl_jobs_claim_order ON dl_jobs(queue, priority, created_at, job_id)
  WHERE status = 'queued';
-- "Is an earlier job of this lock_key waiting?" and "does anyone wait on this
-- key?" are probes of this index.
CREATE INDEX IF NOT EXISTS ix_dl_jobs_lock_queued ON dl_jobs(lock_key, priority, created_at, job_id)
  WHERE status = 'queued';
-- "Is this lock_key held by a running job?"
CREATE INDEX IF NOT EXISTS ix_dl_jobs_lock_running ON dl_jobs(lock_key)
  WHERE status = 'running';
CREATE INDEX IF NOT EXISTS ix_dl_job_events_job ON dl_job_events(job_id, event_id);

-- The jobs table churns (every job is updated at least twice): vacuum and
-- analyze it often so dead index entries and stale statistics do not slow
-- the claim down.
ALTER TABLE dl_jobs SET (
  autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_vacuum_threshold = 1000,
  autovacuum_analyze_scale_factor = 0.02,
  autovacuum_analyze_threshold = 1000,
  autovacuum_vacuum_cost_delay = 0
);

-- Notifications. The seed fires one pg_notify per inserted or updated row,
-- and every notifying transaction serializes on the notification queue at
-- commit. Inserts now notify once per statement and per distinct queue whose
-- new jobs are ready; updates keep the seed's per-row contract but the WHEN
-- clause is evaluated without calling plpgsql, so the claim and finish
-- updates (which never make a job ready) cost nothing. Identical
-- notifications within a transaction are merged by PostgreSQL.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dl_notify_inserted() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('dl_jobs', q.queue)
  FROM (SELECT DISTINCT queue FROM dl_new_jobs WHERE status = 'queued' AND available_at <= now()) q;
  RETURN NULL;
END $$ LANGUAGE plpgsql;
-- +goose StatementEnd

DROP TRIGGER IF EXISTS dl_jobs_notify_ins ON dl_jobs;
DROP TRIGGER IF EXISTS dl_jobs_notify_upd ON dl_jobs;
DROP TRIGGER IF EXISTS dl_jobs_notify_insert ON dl_jobs;
DROP TRIGGER IF EXISTS dl_jobs_notify_update ON dl_jobs;
CREATE TRIGGER dl_jobs_notify_insert AFTER INSERT ON dl_jobs
  REFERENCING NEW TABLE AS dl_new_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION dl_notify_inserted();
CREATE TRIGGER dl_jobs_notify_update AFTER UPDATE OF status, available_at ON dl_jobs
  FOR EACH ROW
  WHEN (NEW.status = 'queued' AND NEW.available_at <= now()
        AND (OLD.status IS DISTINCT FROM NEW.status OR OLD.available_at IS DISTINCT FROM NEW.available_at))
  EXECUTE FUNCTION notify_job_ready();

-- Per-queue settings; a queue without a row has the defaults.
CREATE TABLE IF NOT EXISTS dl_queues (
  queue text PRIMARY KEY,
  paused boolean NOT NULL DEFAULT false,
  updated_at timestamptz NOT NULL DEFAULT now(),
  updated_by text
);

-- Live worker processes. Each process upserts its row on every heartbeat
-- tick and deletes it on a clean exit; rows not seen for a while are stale.
CREATE TABLE IF NOT EXISTS dl_workers (
  worker_id text PRIMARY KEY,
  host text NOT NULL,
  pid int NOT NULL,
  version text NOT NULL DEFAULT '',
  queues jsonb NOT NULL DEFAULT '[]'::jsonb,
  running int NOT NULL DEFAULT 0,
  draining boolean NOT NULL DEFAULT false,
  started_at timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE IF EXISTS dl_workers;
DROP TABLE IF EXISTS dl_queues;
DROP TRIGGER IF EXISTS dl_jobs_notify_insert ON dl_jobs;
DROP TRIGGER IF EXISTS dl_jobs_notify_update ON dl_jobs;
DROP FUNCTION IF EXISTS dl_notify_inserted();
CREATE TRIGGER dl_jobs_notify_ins AFTER INSERT ON dl_jobs
  FOR EACH ROW EXECUTE FUNCTION notify_job_ready();
CREATE TRIGGER dl_jobs_notify_upd AFTER UPDATE OF status, available_at ON dl_jobs
  FOR EACH ROW EXECUTE FUNCTION notify_job_ready();
DROP INDEX IF EXISTS ix_dl_job_events_job;
DROP INDEX IF EXISTS ix_dl_jobs_lock_running;
DROP INDEX IF EXISTS ix_dl_jobs_lock_queued;
DROP INDEX IF EXISTS ix_dl_jobs_claim_order;
ALTER TABLE dl_jobs DROP COLUMN IF EXISTS worker_id;
ALTER TABLE dl_jobs DROP COLUMN IF EXISTS result;
