package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/dataloader/dataloader/internal/dbsqlc"
)

// LockSession is one dedicated connection that holds the advisory locks of
// every job a process runs. One session for many locks costs one connection
// per process instead of one per running job; if the session is lost, all its
// locks are released by the server, and the caller must re-take them or stop
// the jobs (Lost reports it).
type LockSession struct {
	conn *pgx.Conn
	q    *dbsqlc.Queries
}

// OpenLockSession opens the dedicated lock connection.
func OpenLockSession(ctx context.Context, dsn string) (*LockSession, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse dsn: %w", err)
	}
	cfg.RuntimeParams["application_name"] = "dataloader-locks"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open lock session: %w", err)
	}
	return &LockSession{conn: conn, q: dbsqlc.New(conn)}, nil
}

// TryLock tries the advisory lock of each key and reports, in order, which
// were acquired.
func (l *LockSession) TryLock(ctx context.Context, keys []string) ([]bool, error) {
	rows, err := l.q.LockTryMany(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("try %d advisory locks: %w", len(keys), err)
	}
	out := make([]bool, len(rows))
	for i, r := range rows {
		out[i] = r.Acquired
	}
	return out, nil
}

// Unlock releases one hold of each key's advisory lock.
func (l *LockSession) Unlock(ctx context.Context, keys []string) error {
	if err := l.q.LockReleaseMany(ctx, keys); err != nil {
		return fmt.Errorf("release %d advisory locks: %w", len(keys), err)
	}
	return nil
}

// Lost reports whether the session's connection is closed (its locks are gone).
func (l *LockSession) Lost() bool { return l.conn.IsClosed() }

// Close ends the session, releasing every lock it holds.
func (l *LockSession) Close(ctx context.Context) error { return l.conn.Close(ctx) }
