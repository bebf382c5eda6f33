package pipeline_test

import (
	"context"
	"encoding/json"
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
	"github.com/dataloader/dataloader/internal/pipeline"
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
	dir   string // DL_ETL_FILE_DIR of the test
	// targets are the named etl.load databases (DL_ETL_TARGETS_JSON).
	targets map[string]string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &env{t: t, dsn: dsn, pool: pool, store: store.New(pool), dir: t.TempDir()}
}

func testLogger() *slog.Logger {
	if os.Getenv("DL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func (e *env) deps() pipeline.Deps {
	return pipeline.Deps{DSN: e.dsn, FileDir: e.dir, Targets: e.targets, Log: testLogger()}
}

// registry holds the built-ins with test-sized retry policies.
func (e *env) registry() *worker.Registry {
	reg := worker.NewRegistry()
	reg.MustRegister(pipeline.ETLTask, worker.Task{Handler: pipeline.NewETL(e.deps()), Retry: job.Linear{Step: 20 * time.Millisecond}})
	reg.MustRegister(pipeline.DeliverTask, worker.Task{Handler: pipeline.NewDeliver(e.deps())})
	return reg
}

// startManager runs a Manager (with its own listener) working queue until
// the test ends or stop is called.
func (e *env) startManager(queue string, concurrency int) (stop func()) {
	e.t.Helper()
	cfg := worker.Config{Queues: []worker.QueueConfig{{Name: queue, Concurrency: concurrency}},
		PollInterval: 200 * time.Millisecond, Heartbeat: time.Second, ShutdownGrace: 5 * time.Second,
		ProgressInterval: 100 * time.Millisecond}
	log := testLogger()
	l := notify.New(e.dsn, log, notify.ChannelJobs, notify.ChannelCancel, notify.ChannelDone)
	m := worker.New(cfg, e.dsn, e.store, l, e.registry(), log, metrics.New())
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
			e.t.Fatalf("job %s: status %s after %v, want %s (error %v)", id, j.Status, timeout, want, deref(j.Error))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFinished polls until the job is finished and returns it.
func (e *env) waitFinished(id uuid.UUID, timeout time.Duration) job.Job {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j := e.get(id)
		if j.Status.Finished() {
			return j
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s: status %s after %v, want finished", id, j.Status, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) events(id uuid.UUID, kind string) []job.Event {
	e.t.Helper()
	evs, err := e.store.Events(context.Background(), id, 0, 10000)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []job.Event
	for _, ev := range evs {
		if kind == "" || ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.pool.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

func (e *env) scalar(sql string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func jsonArgs(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func ptr[T any](v T) *T { return &v }
