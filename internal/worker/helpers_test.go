package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/metrics"
	"github.com/dataloader/dataloader/internal/notify"
	"github.com/dataloader/dataloader/internal/pgtest"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/internal/worker"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is one test database with a store on it.
type env struct {
	t     *testing.T
	dsn   string
	pool  *pgxpool.Pool
	store *store.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &env{t: t, dsn: dsn, pool: pool, store: store.New(pool)}
}

func testLogger() *slog.Logger {
	if os.Getenv("DL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startManager runs a Manager (with its own listener) until the test ends
// or the returned stop function is called.
func (e *env) startManager(cfg worker.Config, reg *worker.Registry) (stop func()) {
	e.t.Helper()
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = time.Second
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 5 * time.Second
	}
	log := testLogger()
	l := notify.New(e.dsn, log, notify.ChannelJobs, notify.ChannelCancel, notify.ChannelDone)
	m := worker.New(cfg, e.dsn, e.store, l, reg, log, metrics.New())
	ctx, cancel := context.WithCancel(context.Background())
	lctx, lcancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = l.Run(lctx) }()
	go func() {
		defer wg.Done()
		if err := m.Run(ctx); err != nil {
			e.t.Errorf("manager: %v", err)
		}
		lcancel()
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	e.t.Cleanup(stop)
	return stop
}

func (e *env) trigger(p job.TriggerParams) uuid.UUID {
	e.t.Helper()
	res, err := e.store.Trigger(context.Background(), p, 60)
	if err != nil {
		e.t.Fatalf("trigger: %v", err)
	}
	return res.JobID
}

func (e *env) get(id uuid.UUID) job.Job {
	e.t.Helper()
	j, err := e.store.Get(context.Background(), id)
	if err != nil {
		e.t.Fatalf("get %s: %v", id, err)
	}
	return j
}

// waitStatus polls until the job has the status or the timeout passes.
func (e *env) waitStatus(id uuid.UUID, want job.Status, timeout time.Duration) job.Job {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j := e.get(id)
		if j.Status == want {
			return j
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s: status %s after %v, want %s", id, j.Status, timeout, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) events(id uuid.UUID) []job.Event {
	e.t.Helper()
	evs, err := e.store.Events(context.Background(), id, 0, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

func kinds(evs []job.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Kind
	}
	return out
}

func countKind(evs []job.Event, kind string) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

func (e *env) scalar(sql string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func registry(t *testing.T, tasks map[string]worker.Task) *worker.Registry {
	t.Helper()
	reg := worker.NewRegistry()
	for name, task := range tasks {
		if err := reg.Register(name, task); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func handler(f func(ctx context.Context, run job.Run) error) worker.Task {
	return worker.Task{Handler: job.HandlerFunc(f)}
}

func params(queue, task, lockKey string) job.TriggerParams {
	return job.TriggerParams{Queue: queue, Task: task, LockKey: lockKey}
}

func jsonArgs(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
}
