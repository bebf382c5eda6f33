-- What the built-in pipelines need from the schema:
--
--  * dl_jobs.checkpoint: a handler's durable resume point (etl.load stores its
--    last committed chunk there), written during the run, fenced on the
--    attempt like every other worker write, and handed to the next attempt
--    with the claim.
--  * dl_jobs.coalesce_key: a newer queued job with the same key supersedes
--    (cancels) older queued ones at insert; the partial index finds them.
--  * dl_alerts: an outbox of final failures. A trigger fills it in the very
--    transaction that marks a job failed or lost, whoever does that (the
--    finisher, the reaper, an operator's SQL), so each final failure is
--    alerted exactly once: the maintenance loop of one replica takes the row
--    with SKIP LOCKED and enqueues the webhook delivery in the same
--    transaction.
--  * dl_schedules: periodic jobs (DL_SCHEDULES_JSON) with their last and next
--    tick, for the dashboard.
--
-- Indexes are built CONCURRENTLY so migrating a live table with millions of
-- jobs does not block the queue; an invalid leftover of a failed concurrent
-- build is dropped first (IF NOT EXISTS would otherwise keep it forever).

-- +goose NO TRANSACTION
-- +goose Up
ALTER TABLE dl_jobs ADD COLUMN IF NOT EXISTS checkpoint jsonb;
ALTER TABLE dl_jobs ADD COLUMN IF NOT EXISTS coalesce_key text;

-- +goose StatementBegin
DO $$
DECLARE ix text;
BEGIN
  FOR ix IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = 'dl_jobs'::regclass AND NOT i.indisvalid
              AND c.relname IN ('ix_dl_jobs_coalesce_queued', 'ix_dl_jobs_finished')
  LOOP
    EXECUTE format('DROP INDEX %I', ix);
  END LOOP;
END $$;
-- +goose StatementEnd

-- "Which queued jobs carry this coalesce_key?" at every coalesced insert.
CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_dl_jobs_coalesce_queued ON dl_jobs (coalesce_key)
  WHERE status = 'queued' AND coalesce_key IS NOT NULL;
-- Retention walks finished jobs oldest first. The dashboard migration
-- (00004) creates this very index for its throughput chart; declaring it
-- here too (same name and definition, so a no-op after 00004) keeps
-- retention's plan from depending on another feature's migration.
CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_dl_jobs_finished ON dl_jobs (finished_at, queue)
  WHERE finished_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS dl_alerts (
  alert_id   bigserial PRIMARY KEY,
  job_id     uuid NOT NULL, -- no foreign key: retention may delete the job first
  queue      text NOT NULL,
  task       text NOT NULL,
  status     text NOT NULL, -- failed or lost
  attempt    int NOT NULL,
  error      text,
  producer   text,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dl_alert_final_failure() RETURNS trigger AS $$
BEGIN
  INSERT INTO dl_alerts (job_id, queue, task, status, attempt, error, producer)
  VALUES (NEW.job_id, NEW.queue, NEW.task, NEW.status::text, NEW.attempt, NEW.error, NEW.producer);
  RETURN NULL;
END $$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- The WHEN clause is evaluated without calling plpgsql, so the claim,
-- finish and heartbeat updates of every other job cost nothing. One DO block
-- keeps the replacement atomic (the file runs without a transaction).
-- +goose StatementBegin
DO $$
BEGIN
  DROP TRIGGER IF EXISTS dl_jobs_alert_final ON dl_jobs;
  CREATE TRIGGER dl_jobs_alert_final AFTER UPDATE OF status ON dl_jobs
    FOR EACH ROW
    WHEN (NEW.status IN ('failed', 'lost') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION dl_alert_final_failure();
END $$;
-- +goose StatementEnd

CREATE TABLE IF NOT EXISTS dl_schedules (
  name        text PRIMARY KEY,
  cron        text NOT NULL,
  queue       text NOT NULL,
  task        text NOT NULL,
  args        jsonb NOT NULL DEFAULT '{}'::jsonb,
  lock_key    text NOT NULL,
  last_tick   timestamptz,
  last_job_id uuid,
  next_tick   timestamptz,
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE IF EXISTS dl_schedules;
DROP TRIGGER IF EXISTS dl_jobs_alert_final ON dl_jobs;
DROP FUNCTION IF EXISTS dl_alert_final_failure();
DROP TABLE IF EXISTS dl_alerts;
DROP INDEX CONCURRENTLY IF EXISTS ix_dl_jobs_coalesce_queued;
ALTER TABLE dl_jobs DROP COLUMN IF EXISTS coalesce_key;
ALTER TABLE dl_jobs DROP COLUMN IF EXISTS checkpoint;
