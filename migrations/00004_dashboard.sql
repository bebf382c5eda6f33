-- What the dashboard needs from the schema: indexes that serve every jobs-list
-- filter in job_id order (job ids are UUIDv7, so job_id order is creation
-- order and the list pages by keyset on job_id), and one that finds recently
-- finished jobs for the throughput chart.
--
-- Each filter gets (column, job_id): "newest jobs of queue q before cursor c"
-- is then a single backward index range scan that stops after one page,
-- whatever the filter's selectivity and wherever its rows sit in time.
--
-- The price is paid by writes: a claim or finish changes status, so it is
-- not a HOT update, and every index whose predicate holds gets an entry for
-- the new row version. The list indexes therefore leave running jobs out:
-- the claim and every heartbeat (which moves lease_expires_at, indexed, so
-- it is not HOT either) skip them, leaving one entry at insert and one at
-- finish. Running jobs are few (at most the fleet's worker slots) and the
-- list finds them through the seed's running-only lease index instead (see
-- internal/store/dashboard_list.go). The finished_at index holds finished
-- jobs only. What they cost the workdown rate is measured by
-- `go tool task bench -- -scenario dashboard` (dash_index_cost_pct).
--
-- Text search in args and error deliberately has no index: a trigram GIN
-- index on args::text would be rebuilt for every claim and finish (both are
-- non-HOT updates) on the hot path. The dashboard bounds that search instead
-- (it scans at most a fixed window of the newest matching rows per page).
--
-- The indexes are built CONCURRENTLY so that migrating a live database with
-- millions of jobs does not block the queue. A concurrent build that failed
-- leaves an INVALID index behind, which IF NOT EXISTS would keep forever, so
-- each build first drops an invalid leftover of the same name.

-- +goose NO TRANSACTION
-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE ix text;
BEGIN
  FOR ix IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = 'dl_jobs'::regclass AND NOT i.indisvalid
              AND c.relname IN ('ix_dl_jobs_queue_id', 'ix_dl_jobs_status_id', 'ix_dl_jobs_task_id',
                                'ix_dl_jobs_lock_key_id', 'ix_dl_jobs_finished')
  LOOP
    EXECUTE format('DROP INDEX %I', ix);
  END LOOP;
END $$;
-- +goose StatementEnd

CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_dl_jobs_queue_id ON dl_jobs (queue, job_id) WHERE status <> 'running';
CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_dl_jobs_status_id ON dl_jobs (status, job_id) WHERE status <> 'running';
CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_dl_jobs_task_id ON dl_jobs (task, job_id) WHERE status <> 'running';
CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_dl_jobs_lock_key_id ON dl_jobs (lock_key, job_id) WHERE status <> 'running';
CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_dl_jobs_finished ON dl_jobs (finished_at, queue)
  WHERE finished_at IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS ix_dl_jobs_finished;
DROP INDEX CONCURRENTLY IF EXISTS ix_dl_jobs_lock_key_id;
DROP INDEX CONCURRENTLY IF EXISTS ix_dl_jobs_task_id;
DROP INDEX CONCURRENTLY IF EXISTS ix_dl_jobs_status_id;
DROP INDEX CONCURRENTLY IF EXISTS ix_dl_jobs_queue_id;
