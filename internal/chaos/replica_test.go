// Package chaos_test breaks things for real: replicas of the product run as
// separate processes (this test binary re-executed with DL_CHAOS_REPLICA=1),
// get SIGTERM and SIGKILL at awkward moments, and PostgreSQL itself is
// restarted under them. A recording task tells afterwards whether any job
// was lost, done twice, or ran concurrently with another job of its lock_key.
package chaos_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataloader/dataloader/internal/app"
	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/config"
	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/pgtest"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/internal/worker"
)

func TestMain(m *testing.M) {
	if os.Getenv("DL_CHAOS_REPLICA") == "1" {
		os.Exit(replicaMain())
	}
	pgtest.Main(m)
}

// replicaMain is the product's main with the recording task added.
func replicaMain() int {
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		for range sigs { // a second signal changes nothing
		}
	}()
	pool, err := pgxpool.New(ctx, cfg.DatabaseDSN)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	a, err := app.New(ctx, cfg, log, app.Options{Tasks: func(r *worker.Registry) {
		r.MustRegister("chaos.record", recordTask(pool))
	}})
	if err != nil {
		log.Error("start", "error", err)
		return 1
	}
	if err := a.Run(ctx); err != nil {
		log.Error("run", "error", err)
		return 1
	}
	return 0
}

const chaosSchema = `
CREATE TABLE IF NOT EXISTS chaos_effects (job_id uuid PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS chaos_runs (job_id uuid, attempt int, pid int, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS chaos_running (lock_key text PRIMARY KEY, job_id uuid, attempt int, pid int);
CREATE TABLE IF NOT EXISTS chaos_overlaps (lock_key text, job_id uuid, other_job uuid, pid int, other_pid int);`

// recordTask runs for args.ms milliseconds while holding its lock_key in
// chaos_running. Finding the key held by another live process is an overlap.
// Its effect (a row in chaos_effects) is idempotent.
func recordTask(pool *pgxpool.Pool) worker.Task {
	return worker.Task{Retry: job.Linear{Step: 50 * time.Millisecond}, Handler: job.HandlerFunc(func(ctx context.Context, run job.Run) error {
		c := run.Job()
		var args struct {
			MS int `json:"ms"`
		}
		_ = json.Unmarshal(c.Args, &args)
		pid := os.Getpid()
		if err := enterKey(ctx, pool, c, pid); err != nil {
			return err
		}
		defer func() {
			// Retried: a row left behind (the server restarting) would look
			// like an overlap to the next job of the key.
			for try := 0; try < 100; try++ {
				_, err := pool.Exec(context.WithoutCancel(ctx), `DELETE FROM chaos_running WHERE lock_key = $1 AND job_id = $2 AND attempt = $3`, c.LockKey, c.ID, c.Attempt)
				if err == nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		if _, err := pool.Exec(ctx, `INSERT INTO chaos_runs (job_id, attempt, pid) VALUES ($1, $2, $3)`, c.ID, c.Attempt, pid); err != nil {
			return err
		}
		select {
		case <-time.After(time.Duration(args.MS) * time.Millisecond):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		_, err := pool.Exec(ctx, `INSERT INTO chaos_effects (job_id) VALUES ($1) ON CONFLICT DO NOTHING`, c.ID)
		return err
	})}
}

func enterKey(ctx context.Context, pool *pgxpool.Pool, c job.Claimed, pid int) error {
	tag, err := pool.Exec(ctx, `INSERT INTO chaos_running (lock_key, job_id, attempt, pid) VALUES ($1, $2, $3, $4) ON CONFLICT (lock_key) DO NOTHING`,
		c.LockKey, c.ID, c.Attempt, pid)
	if err != nil || tag.RowsAffected() == 1 {
		return err
	}
	var other struct {
		job     string
		attempt int
		pid     int
	}
	err = pool.QueryRow(ctx, `SELECT job_id::text, attempt, pid FROM chaos_running WHERE lock_key = $1`, c.LockKey).Scan(&other.job, &other.attempt, &other.pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return enterKey(ctx, pool, c, pid)
	}
	if err != nil {
		return err
	}
	if processAlive(other.pid) && (other.job != c.ID.String() || other.attempt != c.Attempt) {
		if _, err := pool.Exec(ctx, `INSERT INTO chaos_overlaps VALUES ($1, $2, $3::uuid, $4, $5)`, c.LockKey, c.ID, other.job, pid, other.pid); err != nil {
			return err
		}
	}
	_, err = pool.Exec(ctx, `UPDATE chaos_running SET job_id = $2, attempt = $3, pid = $4 WHERE lock_key = $1`, c.LockKey, c.ID, c.Attempt, pid)
	return err
}

func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	// A killed child not yet reaped is a zombie: dead for our purpose.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}

// replica is one product process.
type replica struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string
	mu     sync.Mutex
	log    bytes.Buffer
	exited chan error
}

// startReplica starts a replica on dsn with the given extra environment.
func startReplica(t *testing.T, dsn string, env ...string) *replica {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DL_CHAOS_REPLICA=1", "DL_DB_DSN="+dsn, "DL_LISTEN_ADDR=127.0.0.1:0",
		"DL_DATA_DIR="+t.TempDir(), "DL_HEARTBEAT_SEC=1", "DL_DEFAULT_LEASE_TTL_SEC=3", "DL_REAPER_PERIOD_SEC=1",
		"DL_POLL_INTERVAL_MS=200", "DL_CLAIM_BACKOFF_SEC=1", `WORKERS_JSON=[{"queue":"chaos","concurrency":20}]`)
	cmd.Env = append(cmd.Env, env...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replica{t: t, cmd: cmd, exited: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			r.mu.Lock()
			r.log.Write(append(sc.Bytes(), '\n'))
			r.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "dataloader running" {
				addr <- rec.Addr
			}
		}
	}()
	go func() { r.exited <- cmd.Wait(); pw.Close() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	select {
	case r.addr = <-addr:
	case err := <-r.exited:
		t.Fatalf("replica exited before serving: %v\n%s", err, r.logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("replica did not start\n%s", r.logs())
	}
	return r
}

func (r *replica) logs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.log.String()
	if len(s) > 8000 {
		s = "…" + s[len(s)-8000:]
	}
	return s
}

// kill sends SIGKILL and waits for the process to be gone.
func (r *replica) kill() {
	_ = r.cmd.Process.Kill()
	<-r.exited
}

// terminate sends SIGTERM and returns the exit error and how long the exit took.
func (r *replica) terminate(timeout time.Duration) (error, time.Duration) {
	start := time.Now()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.exited:
		return err, time.Since(start)
	case <-time.After(timeout):
		r.t.Fatalf("replica did not exit within %v of SIGTERM\n%s", timeout, r.logs())
		return nil, 0
	}
}

type db struct {
	t    *testing.T
	pool *pgxpool.Pool
}

func openDB(t *testing.T, dsn string) *db {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(context.Background(), chaosSchema); err != nil {
		t.Fatal(err)
	}
	return &db{t: t, pool: pool}
}

func (d *db) count(sql string, args ...any) int {
	d.t.Helper()
	var n int
	for try := 0; ; try++ {
		err := d.pool.QueryRow(context.Background(), sql, args...).Scan(&n)
		if err == nil {
			return n
		}
		if try == 50 { // the server may be restarting
			d.t.Fatalf("%s: %v", sql, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// operatorToken creates an API token with the operator role.
func (d *db) operatorToken() string {
	d.t.Helper()
	_, secret, err := store.New(d.pool).CreateToken(context.Background(), "chaos", auth.RoleOperator, "chaos test")
	if err != nil {
		d.t.Fatal(err)
	}
	return secret
}

// post sends an authenticated POST.
func post(t *testing.T, url, token, contentType string, body io.Reader) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// waitFor polls cond until it holds or the timeout passes.
func (d *db) waitFor(what string, timeout time.Duration, cond func() bool) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			d.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// enqueue inserts n chaos.record jobs over keys lock_keys, each taking ms,
// with the 3 s lease the replicas are configured for.
func (d *db) enqueue(n, keys, ms int) {
	d.t.Helper()
	_, err := d.pool.Exec(context.Background(), `
		INSERT INTO dl_jobs (job_id, queue, task, args, lock_key, max_attempts, lease_ttl_sec)
		SELECT gen_random_uuid(), 'chaos', 'chaos.record', jsonb_build_object('ms', $3::int), 'key-' || (i % $2), 50, 3
		FROM generate_series(1, $1) AS i`, n, keys, ms)
	if err != nil {
		d.t.Fatal(err)
	}
}

// checkOutcome asserts: every job succeeded, each effect recorded once, no
// lock_key overlap.
func (d *db) checkOutcome(n int) {
	d.t.Helper()
	if got := d.count(`SELECT count(*) FROM dl_jobs WHERE status = 'succeeded'`); got != n {
		d.t.Errorf("succeeded: got %d, want %d (by status: %v)", got, n, d.statuses())
	}
	if got := d.count(`SELECT count(*) FROM chaos_effects`); got != n {
		d.t.Errorf("effects: got %d, want %d", got, n)
	}
	if got := d.count(`SELECT count(*) FROM chaos_overlaps`); got != 0 {
		d.t.Errorf("lock_key overlaps: got %d, want 0", got)
		d.explainOverlaps()
	}
}

func (d *db) statuses() map[string]int {
	rows, err := d.pool.Query(context.Background(), `SELECT status::text, count(*) FROM dl_jobs GROUP BY 1`)
	if err != nil {
		return nil
	}
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		_ = rows.Scan(&s, &n)
		out[s] = n
	}
	return out
}

// explainOverlaps logs the journal of the jobs involved in overlaps.
func (d *db) explainOverlaps() {
	rows, err := d.pool.Query(context.Background(), `
		SELECT o.lock_key, e.job_id::text, e.event_id, e.ts, e.kind, coalesce(e.payload::text, '')
		FROM chaos_overlaps o JOIN dl_job_events e ON e.job_id IN (o.job_id, o.other_job)
		ORDER BY e.event_id`)
	if err != nil {
		d.t.Log(err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var key, job, kind, payload string
		var id int64
		var ts time.Time
		_ = rows.Scan(&key, &job, &id, &ts, &kind, &payload)
		d.t.Logf("%s %s %d %s %-14s %s", key, job[:8], id, ts.Format("15:04:05.000"), kind, payload)
	}
	var o []string
	r2, _ := d.pool.Query(context.Background(), `SELECT format('%s job %s pid %s vs job %s pid %s', lock_key, job_id, pid, other_job, other_pid) FROM chaos_overlaps`)
	for r2.Next() {
		var s string
		_ = r2.Scan(&s)
		o = append(o, s)
	}
	d.t.Logf("overlaps: %v", o)
}
