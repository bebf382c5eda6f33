package pgtest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %q: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func currentDatabase(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var name string
	if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

func hasTable(t *testing.T, conn *pgx.Conn, table string) bool {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func databaseExists(t *testing.T, name string) bool {
	t.Helper()
	var n int
	if err := srv.admin.QueryRow(context.Background(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func TestDSNGivesDistinctMigratedDatabases(t *testing.T) {
	t0 := time.Now()
	a := connect(t, DSN(t))
	t.Logf("first DSN (cluster start + template migration + copy): %s", time.Since(t0).Round(time.Millisecond))
	t1 := time.Now()
	b := connect(t, DSN(t))
	t.Logf("second DSN (copy from template): %s", time.Since(t1).Round(time.Millisecond))

	nameA, nameB := currentDatabase(t, a), currentDatabase(t, b)
	if nameA == nameB {
		t.Fatalf("both DSNs point at %s", nameA)
	}
	for _, c := range []*pgx.Conn{a, b} {
		if !hasTable(t, c, "dl_schema_migrations") {
			t.Errorf("%s: migrations were not applied", currentDatabase(t, c))
		}
	}
	if _, err := a.Exec(context.Background(), "CREATE TABLE only_in_a (id int)"); err != nil {
		t.Fatal(err)
	}
	if hasTable(t, b, "only_in_a") {
		t.Error("a table created in one test database shows up in the other")
	}
}

func TestEmptyDSN(t *testing.T) {
	conn := connect(t, EmptyDSN(t))
	if hasTable(t, conn, "dl_schema_migrations") {
		t.Error("EmptyDSN database has migrations applied")
	}
	if _, err := conn.Exec(context.Background(), "CREATE TABLE seed (id bigint PRIMARY KEY); INSERT INTO seed VALUES (1)"); err != nil {
		t.Fatal(err)
	}
}

func TestPool(t *testing.T) {
	pool := Pool(t)
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM dl_schema_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("no migrations recorded")
	}
}

func TestDatabasesAreDroppedAtCleanup(t *testing.T) {
	var names []string
	t.Run("sub", func(t *testing.T) {
		for _, dsn := range []string{DSN(t), EmptyDSN(t)} {
			conn := connect(t, dsn) // left open: the drop must force it closed
			names = append(names, currentDatabase(t, conn))
		}
		_ = Pool(t)
	})
	for _, name := range names {
		if databaseExists(t, name) {
			t.Errorf("database %s still exists after its test ended", name)
		}
	}
}

func TestParallelDatabases(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	for i := range 6 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			name := currentDatabase(t, connect(t, DSN(t)))
			mu.Lock()
			defer mu.Unlock()
			if seen[name] {
				t.Errorf("database %s handed out twice", name)
			}
			seen[name] = true
		})
	}
}

func TestWithDatabase(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:p@localhost:5432/postgres?sslmode=disable": "postgres://u:p@localhost:5432/dl_t_1?sslmode=disable",
		"postgresql://u@h":                      "postgresql://u@h/dl_t_1",
		"host=/tmp user=u dbname=postgres":      "host=/tmp user=u dbname=postgres dbname=dl_t_1",
		"host=localhost user=u sslmode=disable": "host=localhost user=u sslmode=disable dbname=dl_t_1",
	} {
		got := withDatabase(in, "dl_t_1")
		if got != want {
			t.Errorf("withDatabase(%q) = %q, want %q", in, got, want)
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil || cfg.Database != "dl_t_1" {
			t.Errorf("%q parses to database %q, %v", got, cfg.Database, err)
		}
	}
}

// TestWatchdogCleansUpAfterCrash runs this test binary again with a helper
// test that starts its own private cluster and exits abruptly, skipping
// Main; the watchdog must stop that cluster and remove its directory.
func TestWatchdogCleansUpAfterCrash(t *testing.T) {
	if os.Getenv(envDSN) != "" {
		t.Log("DL_TEST_DB_DSN is set: no private cluster, nothing to watch")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DL_PGTEST_CRASH_HELPER=1")
	out, _ := cmd.CombinedOutput() // exits non-zero by design
	var dir, pid string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "HELPER_DIR="); ok {
			dir = v
		}
		if v, ok := strings.CutPrefix(sc.Text(), "HELPER_PID="); ok {
			pid = v
		}
	}
	if dir == "" || pid == "" {
		t.Fatalf("helper did not report its cluster:\n%s", out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, statErr := os.Stat(dir)
		_, procErr := os.Stat(filepath.Join("/proc", pid, "cmdline"))
		if os.IsNotExist(statErr) && os.IsNotExist(procErr) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the helper died: dir %s stat=%v, postmaster %s /proc stat=%v", dir, statErr, pid, procErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCrashHelper is the child side of TestWatchdogCleansUpAfterCrash; in a
// normal run it does nothing.
func TestCrashHelper(t *testing.T) {
	if os.Getenv("DL_PGTEST_CRASH_HELPER") == "" {
		return
	}
	_ = EmptyDSN(t)
	b, err := os.ReadFile(filepath.Join(srv.dir, "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _, _ := strings.Cut(string(b), "\n")
	fmt.Printf("HELPER_DIR=%s\nHELPER_PID=%s\n", srv.dir, pid)
	os.Exit(3) // no Main, no cleanups
}
