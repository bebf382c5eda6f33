package schedule_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataloader/dataloader/internal/pgtest"
	"github.com/dataloader/dataloader/internal/schedule"
	"github.com/dataloader/dataloader/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestParseValidatesEachScheduleAndNamesIt(t *testing.T) {
	specs, err := schedule.Parse(`[{"name":"nightly","cron":"0 3 * * *","queue":"etl","task":"etl.load","args":{"table":"t"}},
		{"name":"often","cron":"*/10 * * * * *","queue":"q","task":"t"}]`)
	if err != nil || len(specs) != 2 || specs[0].LockKey != "schedule:nightly" {
		t.Fatalf("got %+v, %v; want two schedules with a default lock_key", specs, err)
	}
	for text, want := range map[string]string{
		`[{"name":"a","cron":"every day","queue":"q","task":"t"}]`:                                                   `schedule 1 ("a"): cron:`,
		`[{"name":"a","cron":"@daily","queue":"","task":"t"}]`:                                                       "queue: is required",
		`[{"name":"a","cron":"@daily","queue":"q","task":"t"},{"name":"a","cron":"@hourly","queue":"q","task":"t"}]`: `name "a" appears twice`,
		`[{"name":"a","cron":"@daily","queue":"q","task":"t","args":[1]}]`:                                           "args: must be a JSON object",
		`{"name":"a"}`: "JSON array",
		`[{"name":"a","cron":"@daily","queue":"q","task":"t","every":"1h"}]`: "unknown field",
	} {
		if _, err := schedule.Parse(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", text, err, want)
		}
	}
}

func TestThreeReplicasEnqueueExactlyOneJobPerTick(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	specs := func() []schedule.Spec {
		s, err := schedule.Parse(`[{"name":"every-second","cron":"*/1 * * * * *","queue":"q","task":"t.tick","args":{"n":1}}]`)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < 3; i++ {
		// Each replica has its own pool, as separate processes would.
		p, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		s := &schedule.Scheduler{Store: store.New(p), Specs: specs(), DefaultLeaseTTL: 60, Log: slog.New(slog.DiscardHandler)}
		wg.Add(1)
		go func() { defer wg.Done(); _ = s.Run(ctx) }()
	}
	time.Sleep(3500 * time.Millisecond)
	cancel()
	wg.Wait()
	end := time.Now()

	rows, err := pool.Query(context.Background(), `SELECT idempotency_key, count(*) OVER (PARTITION BY idempotency_key)
		FROM dl_jobs WHERE producer = 'schedule:every-second' ORDER BY idempotency_key`)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for rows.Next() {
		var key string
		var n int
		if err := rows.Scan(&key, &n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("tick %s has %d jobs, want 1", key, n)
		}
		keys = append(keys, key)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// Every whole second in the window is one tick with one job.
	var want []string
	for tick := start.Truncate(time.Second).Add(time.Second); !tick.After(end.Add(-100 * time.Millisecond)); tick = tick.Add(time.Second) {
		want = append(want, schedule.TickKey("every-second", tick))
	}
	if len(keys) < 3 || len(keys) < len(want)-1 || len(keys) > len(want) {
		t.Fatalf("got ticks %v, want one job for each of %v", keys, want)
	}
	for i := 1; i < len(keys); i++ {
		a, _ := time.Parse(time.RFC3339, strings.TrimPrefix(keys[i-1], "schedule:every-second:"))
		b, _ := time.Parse(time.RFC3339, strings.TrimPrefix(keys[i], "schedule:every-second:"))
		if b.Sub(a) != time.Second {
			t.Errorf("ticks %s and %s are not consecutive: a tick was missed", keys[i-1], keys[i])
		}
	}
	sc, err := store.New(pool).ListSchedules(context.Background())
	if err != nil || len(sc) != 1 || sc[0].LastTick == nil || sc[0].LastJobID == nil || sc[0].NextTick == nil ||
		sc[0].Cron != "*/1 * * * * *" || !sc[0].NextTick.After(*sc[0].LastTick) {
		t.Errorf("got schedules %+v, %v; want every-second with last tick, its job and the next tick", sc, err)
	}
}

func TestASchedulerCatchesUpTheLatestTickMissedWhileNoReplicaRan(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := store.New(pool)
	specs, err := schedule.Parse(`[{"name":"hourly","cron":"0 * * * *","queue":"q","task":"t"}]`)
	if err != nil {
		t.Fatal(err)
	}
	// The last tick recorded was five hours ago; then every replica was down.
	now := time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)
	last := now.Add(-5*time.Hour - 30*time.Minute)
	if _, err := pool.Exec(context.Background(), `INSERT INTO dl_schedules (name, cron, queue, task, lock_key, last_tick)
		VALUES ('hourly', '0 * * * *', 'q', 't', 'schedule:hourly', $1)`, last); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	s := &schedule.Scheduler{Store: st, Specs: specs, DefaultLeaseTTL: 60, Log: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return now }}
	_ = s.Run(ctx)
	var keys []string
	rows, _ := pool.Query(context.Background(), "SELECT idempotency_key FROM dl_jobs")
	for rows.Next() {
		var k string
		_ = rows.Scan(&k)
		keys = append(keys, k)
	}
	if want := schedule.TickKey("hourly", time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)); len(keys) != 1 || keys[0] != want {
		t.Errorf("got jobs %v, want only the latest missed tick %s", keys, want)
	}
}
