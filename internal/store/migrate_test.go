package store_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/pgtest"
	"github.com/dataloader/dataloader/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestMigrateOnTheSeedDDLVerbatimKeepsDataAndWorks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.EmptyDSN(t)
	seed, err := os.ReadFile("testdata/appendix_a.sql")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, string(seed)); err != nil {
		t.Fatalf("seed DDL: %v", err)
	}
	// A job the user enqueued before adopting dataloader.
	if _, err := conn.Exec(ctx, `INSERT INTO dl_jobs (job_id, queue, task, lock_key) VALUES (gen_random_uuid(), 'q', 't', 'old')`); err != nil {
		t.Fatal(err)
	}

	if err := store.Migrate(ctx, dsn, quiet); err != nil {
		t.Fatalf("migrate on seed schema: %v", err)
	}
	if err := store.Migrate(ctx, dsn, quiet); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	cur, target, err := store.MigrationVersions(ctx, dsn)
	if err != nil || cur != target {
		t.Fatalf("got version %d of %d (%v), want current", cur, target, err)
	}
	var triggers []string
	rows, _ := conn.Query(ctx, `SELECT tgname FROM pg_trigger WHERE tgrelid = 'dl_jobs'::regclass AND NOT tgisinternal AND tgname LIKE '%notify%' ORDER BY tgname`)
	triggers, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(triggers) != 2 || triggers[0] != "dl_jobs_notify_insert" || triggers[1] != "dl_jobs_notify_update" {
		t.Errorf("got triggers %v (%v), want the statement-level insert and the filtered update trigger", triggers, err)
	}

	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := store.New(pool)
	if _, err := s.Trigger(ctx, job.TriggerParams{Queue: "q", Task: "t", LockKey: "new"}, 60); err != nil {
		t.Fatalf("trigger after migrate: %v", err)
	}
	claimed, err := s.Claim(ctx, "q", "w", 10)
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claimed %d jobs (%v), want the old and the new one", len(claimed), err)
	}
	var fs []store.Finish
	for _, c := range claimed {
		fs = append(fs, store.Finish{Attempt: store.Attempt{JobID: c.ID, Attempt: c.Attempt}, Outcome: store.OutcomeSucceeded})
	}
	done, err := s.FinishMany(ctx, "w", fs)
	if err != nil || len(done) != 2 {
		t.Fatalf("finished %d (%v), want 2", len(done), err)
	}
}

func TestInsertNotifiesOncePerStatementAndQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	s := store.New(pool)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN dl_jobs"); err != nil {
		t.Fatal(err)
	}
	var batch []store.NewJob
	for i := 0; i < 50; i++ {
		batch = append(batch, store.NewJob{Queue: []string{"a", "b"}[i%2], Task: "t", LockKey: "k"})
	}
	if _, err := s.TriggerMany(ctx, batch, 60); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for {
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		n, err := conn.Conn().WaitForNotification(wctx)
		cancel()
		if err != nil {
			break
		}
		got[n.Payload]++
	}
	if len(got) != 2 || got["a"] != 1 || got["b"] != 1 {
		t.Errorf("got notifications %v, want one for a and one for b", got)
	}
}
