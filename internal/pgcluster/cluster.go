// Package pgcluster starts a private PostgreSQL cluster from the machine's
// binaries (Debian's /usr/lib/postgresql/<major>/bin, PATH, or
// $DL_PG_BIN_DIR), so the product and its tests need no separately managed
// database server.
//
// The cluster lives in a project-local data directory, is created with
// initdb on first use, and listens only on a unix socket (no TCP). When the
// process is root the server runs as the unprivileged "postgres" OS user,
// because PostgreSQL refuses to run as root. A server already running on the
// data directory is reused rather than started twice, and two processes
// starting the same data directory at once are serialised with a lock file
// beside it (<datadir>.lock).
//
// Stop shuts the server down only when this process launched it and no other
// process that reused it still holds it (each Start holds a shared lock on
// <datadir>.attach.lock until its Stop); otherwise the server is left
// running for the next Start to reuse.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// superuser is the cluster's superuser role, created by initdb.
const superuser = "dataloader"

// Options configures Start.
type Options struct {
	// DataDir is the project-local data directory, created (and initdb'd)
	// when absent; absolute or relative to the working directory.
	DataDir string
	// Logger receives structured logs; slog.Default() when nil.
	Logger *slog.Logger
	// Settings are extra postgresql.conf settings passed as -c name=value
	// at start (e.g. fsync=off for tests). "port" only changes the socket
	// name suffix; listen_addresses and unix_socket_directories are always
	// set by Start. fsync=off also makes initdb skip syncing.
	Settings map[string]string
	// Database is a database to create if missing (e.g. "dataloader");
	// empty means none.
	Database string
}

// Cluster is a running PostgreSQL server on a data directory, started or
// reused by Start.
type Cluster struct {
	dataDir  string
	sockDir  string
	port     int
	binDir   string
	user     *osUser
	logger   *slog.Logger
	launched bool // this Start ran pg_ctl start

	mu      sync.Mutex
	attach  *fileLock // shared lock on attachPath while this Cluster is in use
	stopped bool
}

// Start makes sure a PostgreSQL server runs on opts.DataDir and returns a
// handle to it: it installs the binaries if needed (only as root), runs
// initdb on a new data directory, reuses a server that is already running
// there, or starts one with pg_ctl, then creates opts.Database if missing.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if opts.DataDir == "" {
		return nil, errors.New("pgcluster: Options.DataDir is empty")
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: data directory: %w", err)
	}
	port, err := portFrom(opts.Settings)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{dataDir: dataDir, port: port, logger: logger.With("data_dir", dataDir)}
	if err := c.start(ctx, opts); err != nil {
		return nil, fmt.Errorf("pgcluster: start %s: %w", dataDir, err)
	}
	if opts.Database != "" {
		if err := c.createDatabase(ctx, opts.Database); err != nil {
			if serr := c.Stop(context.WithoutCancel(ctx)); serr != nil {
				c.logger.Warn("stopping cluster after failure", "err", serr)
			}
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
	}
	return c, nil
}

// start runs under the data directory's start lock: reuse or launch, then
// register this Cluster as a user of the server.
func (c *Cluster) start(ctx context.Context, opts Options) error {
	if err := mkdirAllTraversable(filepath.Dir(c.dataDir)); err != nil {
		return err
	}
	lock, err := acquireLock(ctx, c.startLockPath(), c.logger)
	if err != nil {
		return err
	}
	defer lock.release()

	t0 := time.Now()
	reused, err := c.findRunning(ctx)
	if err != nil {
		return err
	}
	if reused {
		c.logger.Info("reusing running postgres", "socket_dir", c.sockDir)
	} else {
		if err := c.launch(ctx, opts.Settings); err != nil {
			return err
		}
		c.launched = true
		c.logger.Info("postgres started", "socket_dir", c.sockDir, "took", time.Since(t0).Round(time.Millisecond))
	}
	// No Stop can hold the attach lock exclusively now: it would need the
	// start lock, which we hold.
	c.attach, err = acquireShared(ctx, c.attachLockPath(), c.logger)
	if err != nil {
		if c.launched {
			if serr := c.pgCtlStop(context.WithoutCancel(ctx)); serr != nil {
				c.logger.Warn("stopping cluster after failure", "err", serr)
			}
		}
		return err
	}
	return nil
}

// DSN returns a pgx/libpq keyword/value connection string for database on
// this cluster, as the dataloader superuser over the unix socket, e.g.
// "host=/sockdir port=5432 user=dataloader dbname=X sslmode=disable".
func (c *Cluster) DSN(database string) string {
	return keywordDSN(c.sockDir, c.port, superuser, database)
}

// Stop shuts the server down (fast shutdown: open sessions are
// disconnected) if this Cluster's Start launched it and no other process
// that reused it still holds it; otherwise it only lets go of the server.
// It is idempotent.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	if !c.launched {
		c.attach.release()
		c.stopped = true
		return nil
	}
	lock, err := acquireLock(ctx, c.startLockPath(), c.logger)
	if err != nil {
		return fmt.Errorf("pgcluster: stop: %w", err)
	}
	defer lock.release()
	c.attach.release()
	excl, alone, err := tryExclusive(c.attachLockPath())
	if err != nil {
		return fmt.Errorf("pgcluster: stop: %w", err)
	}
	if !alone {
		c.logger.Info("leaving postgres running: another process is using it")
		c.stopped = true
		return nil
	}
	defer excl.release()
	t0 := time.Now()
	if err := c.pgCtlStop(ctx); err != nil {
		return fmt.Errorf("pgcluster: stop %s: %w", c.dataDir, err)
	}
	c.stopped = true
	c.logger.Info("postgres stopped", "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

func (c *Cluster) startLockPath() string  { return c.dataDir + ".lock" }
func (c *Cluster) attachLockPath() string { return c.dataDir + ".attach.lock" }

// createDatabase creates name unless it exists, tolerating a concurrent
// creator.
func (c *Cluster) createDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connect to create database %q: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %q: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") {
		return nil // duplicate_database, or the unique-index race of two creators
	}
	if err != nil {
		return fmt.Errorf("create database %q: %w", name, err)
	}
	c.logger.Info("created database", "database", name)
	return nil
}
