package main

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataloader/dataloader/internal/store"
)

// keyOf names job i's lock_key: its own key, or one of keys shared ones.
func keyOf(i, keys int) string {
	if keys > 0 {
		i %= keys
	}
	return fmt.Sprintf("k%d", i)
}

// noopBatch builds the jobs first..first+n-1 of bench.noop.
func noopBatch(first, n, keys int) []store.NewJob {
	jobs := make([]store.NewJob, n)
	for i := range jobs {
		jobs[i] = store.NewJob{Queue: benchQueue, Task: noopTask, LockKey: keyOf(first+i, keys)}
	}
	return jobs
}

// triggerMany inserts n no-op jobs with Store.TriggerMany, batch per
// statement, and returns how long it took.
func triggerMany(ctx context.Context, st *store.Store, n, batch, keys int) (time.Duration, error) {
	start := time.Now()
	for done := 0; done < n; {
		k := min(batch, n-done)
		if _, err := st.TriggerMany(ctx, noopBatch(done, k, keys), leaseTTL); err != nil {
			return 0, err
		}
		done += k
	}
	return time.Since(start), nil
}

// copyJobs loads n queued no-op jobs straight into dl_jobs with COPY, batch
// rows per COPY (each its own transaction). It writes no journal rows: the
// scale scenario measures the claim, which never reads the journal.
func copyJobs(ctx context.Context, pool *pgxpool.Pool, n, batch int) (time.Duration, error) {
	start := time.Now()
	cols := []string{"job_id", "queue", "task", "lock_key", "lease_ttl_sec"}
	for done := 0; done < n; {
		k := min(batch, n-done)
		rows := make([][]any, k)
		for i := range rows {
			rows[i] = []any{uuid.Must(uuid.NewV7()), benchQueue, noopTask, keyOf(done+i, 0), int32(leaseTTL)}
		}
		if _, err := pool.CopyFrom(ctx, pgx.Identifier{"dl_jobs"}, cols, pgx.CopyFromRows(rows)); err != nil {
			return 0, fmt.Errorf("copy jobs: %w", err)
		}
		done += k
	}
	return time.Since(start), nil
}

// vacuumAnalyze runs VACUUM ANALYZE on the queue tables, as an operator
// would after a bulk load, and returns how long it took.
func vacuumAnalyze(ctx context.Context, pool *pgxpool.Pool) (time.Duration, error) {
	start := time.Now()
	for _, t := range []string{"dl_jobs", "dl_job_events"} {
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+t); err != nil {
			return 0, fmt.Errorf("vacuum analyze %s: %w", t, err)
		}
	}
	return time.Since(start), nil
}

// countStatus counts jobs of the bench queue in a status.
func countStatus(ctx context.Context, pool *pgxpool.Pool, status string) (int64, error) {
	return queryInt(ctx, pool, "SELECT count(*) FROM dl_jobs WHERE queue = $1 AND status = $2::dl_status", benchQueue, status)
}
