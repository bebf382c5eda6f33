package client_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataloader/dataloader/client"
	"github.com/dataloader/dataloader/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestEnqueueCommitsAndRollsBackWithTheCallersTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if _, err := pool.Exec(ctx, "CREATE TABLE orders (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	enqueue := func(order int, commit bool) uuid.UUID {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES ($1)", order); err != nil {
			t.Fatal(err)
		}
		id, err := client.Enqueue(ctx, tx, client.Params{Queue: "mail", Task: "order.confirm",
			Args: map[string]int{"order": order}, LockKey: "orders", IdempotencyKey: "confirm-" + strconv.Itoa(order)})
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return id
	}

	// Notifications go out on commit, not before.
	listener, err := pgx.Connect(ctx, pool.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(ctx)
	if _, err := listener.Exec(ctx, "LISTEN dl_jobs"); err != nil {
		t.Fatal(err)
	}

	committed := enqueue(1, true)
	if n := count(t, pool, "SELECT count(*) FROM dl_jobs WHERE job_id = $1 AND status = 'queued' AND args->>'order' = '1'", committed); n != 1 {
		t.Errorf("committed: got %d jobs, want 1", n)
	}
	if n := count(t, pool, "SELECT count(*) FROM dl_job_events WHERE job_id = $1 AND kind = 'queued'", committed); n != 1 {
		t.Errorf("committed: got %d queued events, want 1", n)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	note, err := listener.WaitForNotification(wctx)
	cancel()
	if err != nil || note.Payload != "mail" {
		t.Errorf("got notification %v, %v; want one naming queue mail", note, err)
	}

	rolledBack := enqueue(2, false)
	if n := count(t, pool, "SELECT count(*) FROM dl_jobs WHERE job_id = $1", rolledBack) +
		count(t, pool, "SELECT count(*) FROM orders WHERE id = 2"); n != 0 {
		t.Errorf("rolled back: got %d rows, want neither the job nor the order", n)
	}

	// Idempotent like the API: the same key answers the existing job.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again, err := client.Enqueue(ctx, tx, client.Params{Queue: "mail", Task: "order.confirm", LockKey: "orders", IdempotencyKey: "confirm-1"})
	if err != nil || again != committed {
		t.Errorf("got %s, %v for a known idempotency key, want %s", again, err, committed)
	}
	_ = tx.Commit(ctx)
	if n := count(t, pool, "SELECT count(*) FROM dl_jobs"); n != 1 {
		t.Errorf("got %d jobs, want 1", n)
	}
}

func TestEnqueueManyAndCoalescingInOneTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	res, err := client.EnqueueMany(ctx, tx, []client.Params{
		{Queue: "q", Task: "a", LockKey: "k1", IdempotencyKey: "same"},
		{Queue: "q", Task: "a", LockKey: "k1", IdempotencyKey: "same"},
		{Queue: "q", Task: "b", LockKey: "k2", Args: []byte(`{"x":1}`)},
	})
	if err != nil || len(res) != 3 || !res[0].Created || res[1].Created || res[1].JobID != res[0].JobID || !res[2].Created {
		t.Fatalf("got %+v, %v; want created, the same job again, created", res, err)
	}
	older, err := client.Enqueue(ctx, tx, client.Params{Queue: "out", Task: "http.deliver", LockKey: "d1", CoalesceKey: "inbox-7"})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := client.EnqueueMany(ctx, tx, []client.Params{{Queue: "out", Task: "http.deliver", LockKey: "d2", CoalesceKey: "inbox-7"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, "SELECT count(*) FROM dl_jobs WHERE job_id = $1 AND status = 'canceled'", older); n != 1 {
		t.Errorf("the older coalesced job was not superseded")
	}
	if n := count(t, pool, "SELECT count(*) FROM dl_job_events WHERE job_id = $1 AND kind = 'superseded' AND payload->>'by' = $2",
		older, batch[0].JobID.String()); n != 1 {
		t.Errorf("got %d superseded events naming the newer job, want 1", n)
	}
}

func TestEnqueueRefusesInvalidParamsNamingTheField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for field, p := range map[string]client.Params{
		"queue":    {Task: "t", LockKey: "k"},
		"lock_key": {Queue: "q", Task: "t"},
		"args":     {Queue: "q", Task: "t", LockKey: "k", Args: []int{1}},
	} {
		_, err := client.Enqueue(ctx, tx, p)
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Field != field {
			t.Errorf("got %v, want an error naming %s", err, field)
		}
	}
}
