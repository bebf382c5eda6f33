package pgcluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// testSettings are the fast, non-durable settings tests use.
var testSettings = map[string]string{"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}

// tempDir returns a fresh directory the postgres OS user can traverse (when
// running as root), removed at cleanup. t.TempDir's parent is 0700.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgcluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func startT(t *testing.T, opts Options) *Cluster {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	if opts.Settings == nil {
		opts.Settings = testSettings
	}
	t0 := time.Now()
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Start took %s (launched=%v)", time.Since(t0).Round(time.Millisecond), c.launched)
	t.Cleanup(func() { c.Stop(context.Background()) })
	return c
}

func selectOne(t *testing.T, dsn string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %q: %v", dsn, err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("SELECT 1 = %d, %v", n, err)
	}
}

func isUp(c *Cluster) bool { return answers(context.Background(), c.sockDir, c.port) }

func TestStartReuseStopRestart(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(tempDir(t), "pgdata")
	c1 := startT(t, Options{DataDir: dir, Database: "dataloader"})
	if !c1.launched {
		t.Fatal("first Start did not launch the server")
	}
	if c1.sockDir != dir {
		t.Errorf("socket dir = %s, want the data dir %s", c1.sockDir, dir)
	}
	selectOne(t, c1.DSN("dataloader"))

	c2 := startT(t, Options{DataDir: dir, Database: "dataloader"})
	if c2.launched {
		t.Fatal("second Start launched another server instead of reusing")
	}
	if c2.DSN("x") != c1.DSN("x") {
		t.Errorf("DSNs differ: %q vs %q", c2.DSN("x"), c1.DSN("x"))
	}
	if err := c2.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !isUp(c1) {
		t.Fatal("Stop of the reusing cluster stopped the server")
	}
	selectOne(t, c1.DSN("dataloader"))

	if err := c1.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if isUp(c1) {
		t.Fatal("server still answers after Stop")
	}
	if err := c1.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}

	// A postmaster.pid whose PID now belongs to an unrelated live process
	// (PID reuse after a crash) must not block the restart.
	fake := fmt.Sprintf("%d\n%s\n0\n5432\n%s\n\n0 0\nready   \n", os.Getpid(), dir, dir)
	if err := os.WriteFile(filepath.Join(dir, "postmaster.pid"), []byte(fake), 0o600); err != nil {
		t.Fatal(err)
	}
	c3 := startT(t, Options{DataDir: dir, Database: "other"})
	if !c3.launched {
		t.Fatal("restart did not launch")
	}
	selectOne(t, c3.DSN("dataloader"))
	selectOne(t, c3.DSN("other"))
	if err := c3.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestRestartAfterCrash(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(tempDir(t), "pgdata")
	c1 := startT(t, Options{DataDir: dir})
	pf, err := readPidFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pf.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; processAlive(pf.pid) && i < 250; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, "postmaster.pid")); err != nil {
		t.Fatalf("expected a stale postmaster.pid after SIGKILL: %v", err)
	}
	// Stopping the handle of the crashed server succeeds: it is gone already.
	if err := c1.Stop(context.Background()); err != nil {
		t.Fatalf("Stop of the crashed cluster: %v", err)
	}
	c2 := startT(t, Options{DataDir: dir, Database: "dataloader"})
	if !c2.launched {
		t.Fatal("Start after a crash did not launch a new server")
	}
	selectOne(t, c2.DSN("dataloader"))
	if err := c2.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if isUp(c2) {
		t.Fatal("server still answers after Stop")
	}
}

func TestLongSocketPathFallsBack(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(tempDir(t), strings.Repeat("long-directory-name-", 5), "pg data")
	c := startT(t, Options{DataDir: dir, Settings: map[string]string{"fsync": "off", "port": "5499"}})
	if c.sockDir == dir || !strings.HasPrefix(c.sockDir, os.TempDir()) {
		t.Errorf("socket dir = %s, want a short dir under %s", c.sockDir, os.TempDir())
	}
	if !strings.Contains(c.DSN("postgres"), "port=5499") {
		t.Errorf("DSN %q does not use port 5499", c.DSN("postgres"))
	}
	selectOne(t, c.DSN("postgres"))
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(c.sockDir)
}

func TestConcurrentStart(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(tempDir(t), "pgdata")
	var wg sync.WaitGroup
	clusters := make([]*Cluster, 2)
	errs := make([]error, 2)
	for i := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clusters[i], errs[i] = Start(context.Background(), Options{
				DataDir: dir, Logger: testLogger(t), Settings: testSettings, Database: "dataloader",
			})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if clusters[0].launched == clusters[1].launched {
		t.Fatalf("launched = %v, %v; want exactly one launch", clusters[0].launched, clusters[1].launched)
	}
	launcher, reuser := clusters[0], clusters[1]
	if reuser.launched {
		launcher, reuser = reuser, launcher
	}
	// The launcher stops first while the reuser still holds the server:
	// the server must stay up for the reuser.
	if err := launcher.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	selectOne(t, reuser.DSN("dataloader"))
	if err := reuser.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Nobody stops it now; a new Start reuses it and we stop it by hand.
	c := startT(t, Options{DataDir: dir})
	if c.launched {
		t.Fatal("expected the orphaned server to be reused")
	}
	c.user, _ = clusterUser()
	c.binDir, _ = FindBinDir()
	if err := c.pgCtlStop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
