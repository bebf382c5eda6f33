package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/pipeline"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/internal/worker"
)

// Flags of the etl scenario (registered here so the scenario stays in one
// file).
var (
	etlRows  = flag.Int("etl-rows", 500_000, "etl: rows of the CSV file loaded")
	etlChunk = flag.Int("etl-chunk", pipeline.DefaultChunkSize, "etl: rows per chunk (one transaction each)")
)

// runETL times the real etl.load handler, run by a Manager, loading a CSV
// file of -etl-rows rows into a 5-column table with a primary key: once
// into the empty table (inserts), then the same file with new values again
// (every row an ON CONFLICT update). Each figure is timed from trigger to
// the job's committed success, checkpoints included.
func runETL(ctx context.Context, b *bench) error {
	dsn, err := b.database(ctx, "etl")
	if err != nil {
		return err
	}
	st, err := b.openWorker(ctx, dsn, b.o.pool)
	if err != nil {
		return err
	}
	defer st.Pool().Close()
	if _, err := st.Pool().Exec(ctx, `CREATE TABLE public.items (id bigint PRIMARY KEY, name text NOT NULL,
		qty int NOT NULL, price numeric(12,2), updated_at timestamptz)`); err != nil {
		return fmt.Errorf("create target table: %w", err)
	}
	dir, err := os.MkdirTemp("", "dataloader-bench-etl-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for version := range 2 {
		if err := writeBenchCSV(filepath.Join(dir, fmt.Sprintf("items-%d.csv", version)), *etlRows, version); err != nil {
			return err
		}
	}
	deps := pipeline.Deps{DSN: dsn, FileDir: dir, Log: b.log}
	w, err := b.startWorkers(ctx, dsn, st, 1, func(reg *worker.Registry) {
		reg.MustRegister(pipeline.ETLTask, worker.Task{Handler: pipeline.NewETL(deps)})
	})
	if err != nil {
		return err
	}
	defer w.close()
	note("etl.load: %d rows of CSV (5 columns) from a file, %d rows per chunk, into a table with a primary key", *etlRows, *etlChunk)
	for version, figureName := range []string{"etl_rows_per_sec", "etl_upsert_rows_per_sec"} {
		took, err := loadOnce(ctx, st, w, fmt.Sprintf("items-%d.csv", version), int64(version+1))
		if err != nil {
			return err
		}
		what := "into the empty table (inserts)"
		if version > 0 {
			what = "again with new values (every row an update)"
		}
		note("loaded %s in %s", what, took.Round(time.Millisecond))
		figure(figureName, float64(*etlRows)/took.Seconds(), "rows/s")
	}
	var n int64
	if err := st.Pool().QueryRow(ctx, "SELECT count(*) FROM items WHERE qty = id % 1000 + 1").Scan(&n); err != nil || n != int64(*etlRows) {
		note("WARNING: %d rows carry the second load's values, want %d (err %v)", n, *etlRows, err)
	} else {
		note("checked in SQL: %d rows, each once, with the second load's values", n)
	}
	return nil
}

// loadOnce triggers one etl.load and waits until the Manager has committed
// its success (the want-th success of the run).
func loadOnce(ctx context.Context, st *store.Store, w *workers, file string, want int64) (time.Duration, error) {
	args, _ := json.Marshal(pipeline.ETLArgs{Source: file, Table: "public.items", Keys: []string{"id"}, ChunkSize: *etlChunk})
	start := time.Now()
	res, err := st.Trigger(ctx, job.TriggerParams{Queue: benchQueue, Task: pipeline.ETLTask, Args: args, LockKey: "items"}, leaseTTL)
	if err != nil {
		return 0, err
	}
	end, ok := w.waitSucceeded(ctx, want, 10*time.Minute)
	if !ok {
		j, _ := st.Get(ctx, res.JobID)
		return 0, fmt.Errorf("etl.load %s did not succeed: status %s, error %v", file, j.Status, deref(j.Error))
	}
	return end.Sub(start), nil
}

// writeBenchCSV writes n rows of id,name,qty,price,updated_at.
func writeBenchCSV(path string, n, version int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintln(w, "id,name,qty,price,updated_at")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(w, "%d,item number %d,%d,%d.%02d,2026-11-%02dT10:00:00Z\n", i, i, i%1000+version, i%500, i%100, version+1)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
