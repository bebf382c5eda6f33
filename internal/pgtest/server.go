package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataloader/dataloader/internal/pgcluster"
	"github.com/dataloader/dataloader/internal/store"
)

// envDSN names the variable pointing tests at an existing server.
const envDSN = "DL_TEST_DB_DSN"

// testSettings make the private cluster fast and non-durable.
var testSettings = map[string]string{
	"fsync":              "off",
	"synchronous_commit": "off",
	"full_page_writes":   "off",
	"max_connections":    "300",
	"max_wal_size":       "256MB", // WAL may sit in memory (tmpfs): keep it small
}

// server is the PostgreSQL server this test binary creates databases on.
type server struct {
	admin    *pgxpool.Pool          // on the maintenance database, for CREATE/DROP DATABASE
	dsnFor   func(db string) string // connection string for a database on this server
	prefix   string                 // database name prefix, unique per run on shared servers
	strategy string                 // " STRATEGY FILE_COPY" on PostgreSQL 15+
	logger   *slog.Logger

	cluster  *pgcluster.Cluster // private cluster, nil with DL_TEST_DB_DSN
	dir      string             // its temporary directory
	watchdog *watchdog

	tplOnce sync.Once
	tplName string
	tplErr  error
}

var (
	setupOnce sync.Once
	srv       *server
	setupErr  error
	dbSeq     atomic.Int64
)

// get returns the server, setting it up on first use; failure is fatal.
func get(t testing.TB) *server {
	t.Helper()
	setupOnce.Do(func() { srv, setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("pgtest: %v", setupErr)
	}
	return srv
}

func setup() (*server, error) {
	// Generous: on a fresh machine, Start may first install PostgreSQL.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	level := slog.LevelWarn
	if os.Getenv("DL_PGTEST_VERBOSE") != "" {
		level = slog.LevelDebug
	}
	s := &server{logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))}
	var adminDSN string
	if dsn := os.Getenv(envDSN); dsn != "" {
		s.prefix = "dl_" + randomHex(4) + "_"
		s.dsnFor = func(db string) string { return withDatabase(dsn, db) }
		adminDSN = dsn
	} else {
		if err := s.startCluster(ctx); err != nil {
			s.close(ctx)
			return nil, err
		}
		s.prefix = "dl_"
		s.dsnFor = s.cluster.DSN
		adminDSN = s.cluster.DSN("postgres")
	}
	admin, err := pgxpool.New(ctx, adminDSN)
	if err == nil {
		var version int
		err = admin.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version)
		if version >= 150000 {
			s.strategy = " STRATEGY FILE_COPY" // much faster than WAL_LOG for small templates
		}
		s.admin = admin
	}
	if err != nil {
		s.close(ctx)
		return nil, fmt.Errorf("connect to test server: %w", err)
	}
	return s, nil
}

// startCluster starts the private cluster in a new temp dir, guarded by a
// watchdog that cleans up if this process dies without calling Main.
func (s *server) startCluster(ctx context.Context) error {
	dir, err := os.MkdirTemp(baseDir(), "dl-pgtest-")
	if err != nil {
		return err
	}
	s.dir = dir
	// MkdirTemp makes 0700 dirs; as root the cluster runs as the postgres
	// user, which must traverse this one.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	dataDir := filepath.Join(dir, "data")
	if s.watchdog, err = startWatchdog(dataDir, dir); err != nil {
		return err
	}
	s.cluster, err = pgcluster.Start(ctx, pgcluster.Options{DataDir: dataDir, Logger: s.logger, Settings: testSettings})
	return err
}

// baseDir picks where the private cluster lives: $DL_PGTEST_DIR, else
// /dev/shm when it is a roomy tmpfs, else the temp dir. Memory-backed
// storage matters: on a disk each CREATE DATABASE spends most of its time
// creating the ~300 files of a database (about 340 ms per copy measured on
// an ext4 disk, 12 ms on tmpfs).
func baseDir() string {
	if dir := os.Getenv("DL_PGTEST_DIR"); dir != "" {
		return dir
	}
	const tmpfsMagic = 0x01021994
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err == nil && st.Type == tmpfsMagic &&
		uint64(st.Bavail)*uint64(st.Bsize) >= 2<<30 && syscall.Access("/dev/shm", 0o7) == nil {
		return "/dev/shm"
	}
	return os.TempDir()
}

// template returns the migrated template database, creating it once.
func (s *server) template() (string, error) {
	s.tplOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		name := s.prefix + "template"
		if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			s.tplErr = fmt.Errorf("create template database: %w", err)
			return
		}
		s.tplName = name
		if err := store.Migrate(ctx, s.dsnFor(name), s.logger); err != nil {
			s.tplErr = fmt.Errorf("migrate template database: %w", err)
			return
		}
		// Nobody may connect to it any more: a connection would make
		// CREATE DATABASE ... TEMPLATE fail.
		if _, err := s.admin.Exec(ctx, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS false"); err != nil {
			s.tplErr = fmt.Errorf("seal template database: %w", err)
		}
	})
	return s.tplName, s.tplErr
}

// newDatabase copies template into a new database dropped at cleanup.
func (s *server) newDatabase(t testing.TB, template string) string {
	t.Helper()
	name := fmt.Sprintf("%st_%d", s.prefix, dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+template+s.strategy); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return s.dsnFor(name)
}

// shutdown releases whatever setup made; it is a no-op if nothing was.
func shutdown() error {
	if srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return srv.close(ctx)
}

func (s *server) close(ctx context.Context) error {
	var errs []error
	if s.admin != nil {
		if s.cluster == nil && s.tplName != "" { // shared server: do not leave the template behind
			if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+s.tplName+" WITH (FORCE)"); err != nil {
				errs = append(errs, fmt.Errorf("drop template database: %w", err))
			}
		}
		s.admin.Close()
		s.admin = nil
	}
	if s.cluster != nil {
		if err := s.cluster.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
		s.cluster = nil
	}
	if s.dir != "" {
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, err)
		}
		s.dir = ""
	}
	s.watchdog.release()
	s.watchdog = nil
	return errors.Join(errs...)
}

// withDatabase returns dsn (URL or keyword/value form) pointed at db.
func withDatabase(dsn, db string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			u.Path = "/" + db
			u.RawPath = ""
			return u.String()
		}
	}
	return dsn + " dbname=" + db // the last dbname wins; names here need no quoting
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
