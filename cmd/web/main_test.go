package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataloader/dataloader/internal/pgtest"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dataloader-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "web")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the binary: %v\n%s", err, out)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	pgtest.Main(m)
}

// process is the product binary running against a test database.
type process struct {
	cmd    *exec.Cmd
	addr   string
	stderr *bytes.Buffer
	exited chan error
	token  string // an operator API token, when the test made one
}

func start(t *testing.T, env ...string) *process {
	t.Helper()
	cmd := exec.Command(binary)
	// Local state (the session key) goes to a temporary directory, not the
	// source tree; env may override it.
	cmd.Env = append(append(os.Environ(), "DL_DATA_DIR="+t.TempDir()), env...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, stderr: &bytes.Buffer{}, exited: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Bytes()
			p.stderr.Write(append(line, '\n'))
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "dataloader running" {
				addr <- rec.Addr
			}
		}
	}()
	go func() { p.exited <- cmd.Wait(); pw.Close() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	select {
	case p.addr = <-addr:
	case err := <-p.exited:
		t.Fatalf("process exited before serving: %v\n%s", err, p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("process did not start serving\n%s", p.stderr)
	}
	return p
}

func (p *process) trigger(t *testing.T, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+p.addr+"/api/v1/jobs/trigger", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("trigger: %d %s", res.StatusCode, b)
	}
}

func count(t *testing.T, pool *pgxpool.Pool, sql string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestSIGTERMHandsBackUnfinishedJobsAndExitsZero(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	p := start(t, "DL_DB_DSN="+dsn, "DL_LISTEN_ADDR=127.0.0.1:0", "DL_SHUTDOWN_GRACE_SEC=1",
		`WORKERS_JSON=[{"queue":"demo","concurrency":5}]`)
	p.token = operatorToken(t, dsn)
	for i := 0; i < 4; i++ {
		p.trigger(t, fmt.Sprintf(`{"queue":"demo","task":"demo.sleep","lock_key":"long-%d","args":{"chunks":50,"chunk_ms":200}}`, i))
	}
	p.trigger(t, `{"queue":"demo","task":"demo.sleep","lock_key":"short","args":{"chunks":3,"chunk_ms":100}}`)
	deadline := time.Now().Add(10 * time.Second)
	for count(t, pool, `SELECT count(*) FROM dl_jobs WHERE status = 'running'`) < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("jobs did not start\n%s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}

	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // a second signal changes nothing
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("exit: %v, want code 0\n%s", err, p.stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("process did not exit after SIGTERM\n%s", p.stderr)
	}
	if took := time.Since(sent); took > 5*time.Second {
		t.Errorf("exit took %v, want about the 1 s grace", took)
	}
	if n := count(t, pool, `SELECT count(*) FROM dl_jobs WHERE status = 'running'`); n != 0 {
		t.Errorf("%d jobs left running", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM dl_jobs WHERE status = 'succeeded' AND lock_key = 'short'`); n != 1 {
		t.Errorf("the short job did not finish within the grace period")
	}
	if n := count(t, pool, `SELECT count(*) FROM dl_jobs WHERE status = 'queued' AND attempt = 0 AND lock_key LIKE 'long-%'`); n != 4 {
		t.Errorf("got %d long jobs queued with attempt 0, want 4 handed back uncharged", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM dl_job_events WHERE kind = 'requeue' AND payload->>'reason' = 'shutdown'`); n != 4 {
		t.Errorf("got %d requeue events with reason shutdown, want 4", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM dl_workers`); n != 0 {
		t.Errorf("worker registry row left behind")
	}
}

func TestInvalidConfigurationRefusesToStartNamingTheVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ env, want string }{
		{`WORKERS_JSON=[{"queue":"a","concurrency":0}]`, "WORKERS_JSON"},
		{`WORKERS_JSON=not json`, "WORKERS_JSON"},
		{`DL_HEARTBEAT_SEC=abc`, "DL_HEARTBEAT_SEC"},
		{`DL_LISTEN_ADDR=nowhere`, "DL_LISTEN_ADDR"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(binary)
			cmd.Env = append(os.Environ(), tc.env, "DL_DB_DSN=host=/nonexistent")
			out, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
				t.Fatalf("got %v, want exit code 2\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output does not name %s:\n%s", tc.want, out)
			}
		})
	}
}
