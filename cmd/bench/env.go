package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataloader/dataloader/internal/pgcluster"
	"github.com/dataloader/dataloader/internal/store"
)

// bench is the run's shared state: options, the server and its admin DSN.
type bench struct {
	o        options
	log      *slog.Logger
	cluster  *pgcluster.Cluster // nil with -dsn
	adminDSN string
	created  []string // databases to drop at the end
}

func newBench(ctx context.Context, o options, log *slog.Logger) (*bench, error) {
	b := &bench{o: o, log: log, adminDSN: o.dsn}
	if o.dsn == "" {
		var settings map[string]string
		if o.statements {
			settings = map[string]string{"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track_planning": "on"}
		}
		c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: o.dataDir, Logger: log, Settings: settings})
		if err != nil {
			return nil, fmt.Errorf("start embedded cluster: %w", err)
		}
		b.cluster = c
		b.adminDSN = c.DSN("postgres")
	}
	return b, nil
}

// header prints the run's context: server version and the settings that
// decide commit cost.
func (b *bench) header() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, b.adminDSN)
	if err != nil {
		note("server: %v", err)
		return
	}
	defer conn.Close(ctx)
	var version string
	_ = conn.QueryRow(ctx, "SHOW server_version").Scan(&version)
	var settings []string
	for _, name := range []string{"fsync", "synchronous_commit", "wal_sync_method", "shared_buffers", "max_connections"} {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err == nil {
			settings = append(settings, name+"="+v)
		}
	}
	where := "embedded cluster " + b.o.dataDir
	if b.cluster == nil {
		where = "server from -dsn"
	}
	note("dataloader bench: %s, PostgreSQL %s (%s)", where, version, strings.Join(settings, " "))
	note("go %s, GOMAXPROCS %d, NumCPU %d; queue concurrency %d, pool max %s", runtime.Version(),
		runtime.GOMAXPROCS(0), runtime.NumCPU(), b.o.concurrency, poolSize(b.o.pool))
	if b.o.pgOptions != "" {
		note("experiment: every bench connection runs with options %q", b.o.pgOptions)
	}
}

func poolSize(n int) string {
	if n <= 0 {
		return fmt.Sprintf("default(%d)", max(4, runtime.NumCPU()))
	}
	return fmt.Sprint(n)
}

// database (re)creates bench_<name>, migrates it and returns its DSN.
func (b *bench) database(ctx context.Context, name string) (string, error) {
	db := "bench_" + name
	conn, err := pgx.Connect(ctx, b.adminDSN)
	if err != nil {
		return "", fmt.Errorf("connect admin: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	ident := pgx.Identifier{db}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("drop %s: %w", db, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", fmt.Errorf("create %s: %w", db, err)
	}
	b.created = append(b.created, db)
	dsn := b.dsnFor(db)
	if err := store.Migrate(ctx, dsn, b.log); err != nil {
		return "", err
	}
	if b.o.statements {
		if _, err := pgExec(ctx, dsn, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
			note("pg_stat_statements unavailable: %v", err)
		}
	}
	// Start from a quiet server: flush what earlier scenarios dirtied, so
	// their checkpoint does not land in this one's measurements.
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		note("CHECKPOINT before the scenario failed (not a superuser?): %v", err)
	}
	return dsn, nil
}

// done drops a scenario's database (unless -keep) so that its autovacuum
// does not run during the next scenario.
func (b *bench) done(ctx context.Context, name string) {
	if b.o.keep {
		return
	}
	db := "bench_" + name
	if _, err := pgExec(ctx, b.adminDSN, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"); err != nil {
		b.log.Warn("drop bench database", "db", db, "error", err)
		return
	}
	for i, c := range b.created {
		if c == db {
			b.created = append(b.created[:i], b.created[i+1:]...)
			break
		}
	}
}

// dsnFor is the admin DSN pointed at database db, with -pg-options.
func (b *bench) dsnFor(db string) string {
	base := b.adminDSN
	if b.cluster != nil {
		base = b.cluster.DSN(db)
	}
	if u, err := url.Parse(base); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + db
		if b.o.pgOptions != "" {
			q := u.Query()
			q.Set("options", b.o.pgOptions)
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	dsn := base + " dbname=" + db // the last keyword wins
	if b.o.pgOptions != "" {
		dsn += " options='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(b.o.pgOptions) + "'"
	}
	return dsn
}

// openWorker returns a Store over a worker pool, as the product's workers
// use, of at most maxConns (0: default).
func (b *bench) openWorker(ctx context.Context, dsn string, maxConns int) (*store.Store, error) {
	pool, err := store.OpenWorkerPool(ctx, dsn, int32(maxConns))
	if err != nil {
		return nil, err
	}
	return store.New(pool), nil
}

// open returns a Store over a new pool of at most maxConns (0: default).
func (b *bench) open(ctx context.Context, dsn string, maxConns int) (*store.Store, error) {
	pool, err := store.Open(ctx, dsn, int32(maxConns))
	if err != nil {
		return nil, err
	}
	return store.New(pool), nil
}

func (b *bench) close(ctx context.Context) {
	if !b.o.keep && len(b.created) > 0 {
		if conn, err := pgx.Connect(ctx, b.adminDSN); err == nil {
			for _, db := range b.created {
				if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"); err != nil {
					b.log.Warn("drop bench database", "db", db, "error", err)
				}
			}
			conn.Close(ctx)
		}
	}
	if b.cluster != nil {
		if err := b.cluster.Stop(ctx); err != nil {
			b.log.Warn("stop embedded cluster", "error", err)
		}
	}
}

// pgExec runs one statement on a short-lived connection.
func pgExec(ctx context.Context, dsn, sql string, args ...any) (int64, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tag, err := conn.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

// queryInt runs a query returning one integer through pool.
func queryInt(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) (int64, error) {
	var n int64
	err := pool.QueryRow(ctx, sql, args...).Scan(&n)
	return n, err
}
