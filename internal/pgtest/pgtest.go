// Package pgtest gives tests throwaway PostgreSQL databases: each DSN(t)
// call creates a fresh database, already migrated with store.Migrate, that
// is dropped when the test ends.
//
// By default each test binary lazily starts ONE private cluster (package
// pgcluster) in a temporary directory, tuned for speed over durability
// (fsync, synchronous_commit and full_page_writes off). Migrations run once
// per binary into a template database, and every test database is a
// file-level copy of it, which takes tens of milliseconds.
//
// When DL_TEST_DB_DSN is set, that server is used instead (connecting as
// given; the role must be allowed to create databases), and database names
// carry a per-run suffix so concurrent test binaries do not collide.
//
// Packages using pgtest should call it from TestMain, so the private
// cluster is stopped and its directory removed when the tests end:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Without that, a watchdog process still stops the cluster and removes its
// directory once the test binary exits, as it also does when the binary
// crashes or is killed.
//
// Missing prerequisites (no PostgreSQL binaries and no way to install them,
// a server that does not start, failing migrations) fail the test; they
// never skip it.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DSN returns the connection string of a fresh database for this test,
// with every migration applied. The database is dropped at t.Cleanup.
func DSN(t testing.TB) string {
	t.Helper()
	s := get(t)
	tpl, err := s.template()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return s.newDatabase(t, tpl)
}

// EmptyDSN returns the connection string of a fresh, empty database (no
// migrations applied), dropped at t.Cleanup; for testing migrations
// themselves, e.g. on top of seed DDL.
func EmptyDSN(t testing.TB) string {
	t.Helper()
	return get(t).newDatabase(t, "template0")
}

// Pool returns a pgxpool on a fresh migrated database (see DSN); the pool
// is closed, and the database dropped, at t.Cleanup.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dsn := DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	t.Cleanup(pool.Close) // runs before the database drop registered by DSN
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("pgtest: ping: %v", err)
	}
	return pool
}

// Main runs the tests and then stops the private cluster this package
// started (if any) and removes its directory, or drops the template
// database from the DL_TEST_DB_DSN server. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if err := shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: shutdown: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
