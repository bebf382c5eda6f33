package maintenance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/maintenance"
	"github.com/dataloader/dataloader/internal/metrics"
	"github.com/dataloader/dataloader/internal/notify"
	"github.com/dataloader/dataloader/internal/pgtest"
	"github.com/dataloader/dataloader/internal/pipeline"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/internal/worker"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

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

// syncBuffer is a log sink shared by replicas.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), substr)
}

// replica runs what one process runs for alerts: a Manager working the
// given queues (with a task that always fails and http.deliver) and an
// Alerter, until the test ends.
func (e *env) replica(webhook string, logs io.Writer, failed *prometheus.CounterVec, queues ...string) {
	e.t.Helper()
	log := slog.New(slog.NewJSONHandler(logs, nil))
	reg := worker.NewRegistry()
	reg.MustRegister("t.fail", worker.Task{Handler: job.HandlerFunc(func(context.Context, job.Run) error {
		return job.Permanent(errors.New("the upstream file is gone"))
	})})
	pipeline.RegisterBuiltins(reg, pipeline.Deps{DSN: e.dsn})
	var qs []worker.QueueConfig
	for _, q := range queues {
		qs = append(qs, worker.QueueConfig{Name: q, Concurrency: 2})
	}
	l := notify.New(e.dsn, log, notify.ChannelJobs, notify.ChannelCancel, notify.ChannelDone)
	m := worker.New(worker.Config{Queues: qs, PollInterval: 100 * time.Millisecond, Heartbeat: time.Second,
		ShutdownGrace: 5 * time.Second}, e.dsn, e.store, l, reg, log, metrics.New())
	al := &maintenance.Alerter{Store: e.store, WebhookURL: webhook, Queue: "alerts", Period: 50 * time.Millisecond,
		DefaultLeaseTTL: 60, Log: log, Failed: failed}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); _ = l.Run(ctx) }()
	go func() { defer wg.Done(); _ = m.Run(ctx) }()
	go func() { defer wg.Done(); _ = al.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); wg.Wait() })
}

func (e *env) waitStatus(id uuid.UUID, want job.Status, timeout time.Duration) job.Job {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j, err := e.store.Get(context.Background(), id)
		if err != nil {
			e.t.Fatal(err)
		}
		if j.Status == want {
			return j
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s: status %s after %v, want %s", id, j.Status, timeout, want)
		}
		time.Sleep(10 * time.Millisecond)
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

// webhook counts the alerts it receives.
type webhook struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newWebhook(t *testing.T, status int) *webhook {
	w := &webhook{}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		w.bodies = append(w.bodies, b)
		w.mu.Unlock()
		rw.WriteHeader(status)
	}))
	t.Cleanup(w.Close)
	return w
}

func (w *webhook) received() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]byte(nil), w.bodies...)
}

func TestFinalFailureRaisesExactlyOneAlertAcrossReplicas(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hook := newWebhook(t, http.StatusNoContent)
	var logs syncBuffer
	r1 := maintenance.NewFailedCounter(prometheus.NewRegistry())
	r2 := maintenance.NewFailedCounter(prometheus.NewRegistry())
	e.replica(hook.URL, &logs, r1, "work", "alerts")
	e.replica(hook.URL, &logs, r2, "work", "alerts")

	res, err := e.store.Trigger(context.Background(), job.TriggerParams{Queue: "work", Task: "t.fail", LockKey: "k"}, 60)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(res.JobID, job.StatusFailed, 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for len(hook.received()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second) // time for a duplicate to show up, if there were one
	got := hook.received()
	if len(got) != 1 {
		t.Fatalf("got %d alert deliveries, want exactly 1", len(got))
	}
	var p maintenance.AlertPayload
	if err := json.Unmarshal(got[0], &p); err != nil {
		t.Fatal(err)
	}
	if p.JobID != res.JobID.String() || p.Status != job.StatusFailed || p.Task != "t.fail" || p.Queue != "work" ||
		!strings.Contains(p.Error, "upstream file is gone") || p.Type != "dataloader.job_failed" {
		t.Errorf("got alert %+v, want the failed job's id, queue, task and error", p)
	}
	if n := logs.count(`"msg":"job failed for good"`); n != 1 {
		t.Errorf("got %d ERROR lines, want 1", n)
	}
	if n := counterValue(r1, "work", "t.fail") + counterValue(r2, "work", "t.fail"); n != 1 {
		t.Errorf("got dataloader_jobs_failed_final_total %v across replicas, want 1", n)
	}
}

func TestLostJobIsAlertedAndAFailingAlertRaisesNoAlertOfItsOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	hook := newWebhook(t, http.StatusNotFound) // every alert delivery fails for good
	var logs syncBuffer
	failed := maintenance.NewFailedCounter(prometheus.NewRegistry())
	e.replica(hook.URL, &logs, failed, "alerts")

	// A job whose worker vanished on its last attempt: the reaper marks it lost.
	res, err := e.store.Trigger(ctx, job.TriggerParams{Queue: "gone", Task: "t.any", LockKey: "k", MaxAttempts: ptr(1), LeaseTTLSec: ptr(1)}, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Claim(ctx, "gone", "vanished-worker", 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	reaper := &maintenance.Reaper{Store: e.store, Period: time.Hour, Name: "test", Log: slog.New(slog.DiscardHandler), Met: metrics.New()}
	if _, err := reaper.ReapOnce(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(res.JobID, job.StatusLost, time.Second)

	deadline := time.Now().Add(10 * time.Second)
	for e.scalar("SELECT count(*) FROM dl_jobs WHERE producer = $1 AND status = 'failed'", maintenance.AlertProducer) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the alert delivery did not fail")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // the alerter sees the alert job's own failure
	if n := e.scalar("SELECT count(*) FROM dl_jobs WHERE task = $1", pipeline.DeliverTask); n != 1 {
		t.Errorf("got %d alert deliveries, want 1 (a failing alert is not alerted)", n)
	}
	if got := len(hook.received()); got != 1 {
		t.Errorf("got %d webhook requests, want 1", got)
	}
	if n := logs.count(`"msg":"job failed for good"`); n != 2 {
		t.Errorf("got %d ERROR lines, want 2 (the lost job and the failed alert)", n)
	}
	if n := counterValue(failed, "gone", "t.any"); n != 1 {
		t.Errorf("got %v lost jobs counted, want 1", n)
	}
	if n := e.scalar("SELECT count(*) FROM dl_alerts"); n != 0 {
		t.Errorf("got %d alerts left in the outbox, want 0", n)
	}
}

func ptr[T any](v T) *T { return &v }

func counterValue(c *prometheus.CounterVec, labels ...string) float64 {
	var m dto.Metric
	if err := c.WithLabelValues(labels...).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
