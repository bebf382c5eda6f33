package worker

import (
	"context"
	"log/slog"
	"sync"

	"github.com/dataloader/dataloader/internal/store"
)

// lockSet holds the advisory locks of the process's running jobs on one
// dedicated session. Session locks are re-entrant, so the set also tracks
// which keys it holds: a second job of a key already held here (possible only
// when our own earlier attempt was reaped while its handler still runs) is a
// conflict, not a second hold.
type lockSet struct {
	dsn  string
	log  *slog.Logger
	mu   sync.Mutex
	sess *store.LockSession
	held map[string]int
}

func openLockSet(ctx context.Context, dsn string, log *slog.Logger) (*lockSet, error) {
	sess, err := store.OpenLockSession(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return &lockSet{dsn: dsn, log: log, sess: sess, held: map[string]int{}}, nil
}

// acquire tries each key's lock and reports which were taken. On a session
// error every key counts as not taken (the jobs go back to the queue) and the
// session is reopened.
func (l *lockSet) acquire(ctx context.Context, keys []string) []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	got := make([]bool, len(keys))
	var ask []string
	var at []int
	seen := map[string]bool{}
	for i, k := range keys {
		if l.held[k] > 0 || seen[k] {
			continue
		}
		seen[k] = true
		ask = append(ask, k)
		at = append(at, i)
	}
	if len(ask) == 0 {
		return got
	}
	if l.sess.Lost() {
		l.reopen(ctx)
	}
	res, err := l.sess.TryLock(ctx, ask)
	if err != nil {
		l.log.Error("advisory lock session failed", "error", err)
		l.reopen(ctx)
		return got
	}
	for j, ok := range res {
		if ok {
			got[at[j]] = true
			l.held[ask[j]]++
		}
	}
	return got
}

// release gives up the locks of finished jobs.
func (l *lockSet) release(ctx context.Context, keys []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var rel []string
	for _, k := range keys {
		if l.held[k] == 0 {
			continue
		}
		l.held[k]--
		if l.held[k] == 0 {
			delete(l.held, k)
		}
		rel = append(rel, k)
	}
	if len(rel) == 0 || l.sess.Lost() {
		return
	}
	if err := l.sess.Unlock(ctx, rel); err != nil {
		l.log.Error("releasing advisory locks failed; reopening the lock session", "error", err)
		l.reopen(ctx)
	}
}

// lost reports keys whose locks are gone because the session dropped and
// could not be re-taken; it reopens the session when needed.
func (l *lockSet) check(ctx context.Context) (lost []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.sess.Lost() {
		return nil
	}
	return l.reopen(ctx)
}

// reopen replaces a broken session and re-takes every held lock; it returns
// the keys that could not be re-taken. Called with mu held.
func (l *lockSet) reopen(ctx context.Context) (lost []string) {
	_ = l.sess.Close(ctx)
	sess, err := store.OpenLockSession(ctx, l.dsn)
	if err != nil {
		l.log.Error("reopening the advisory lock session failed", "error", err)
		for k := range l.held {
			lost = append(lost, k)
		}
		return lost
	}
	l.sess = sess
	if len(l.held) == 0 {
		return nil
	}
	keys := make([]string, 0, len(l.held))
	for k := range l.held {
		keys = append(keys, k)
	}
	res, err := sess.TryLock(ctx, keys)
	if err != nil {
		return keys
	}
	for i, ok := range res {
		if !ok {
			lost = append(lost, keys[i])
		}
	}
	l.log.Warn("advisory lock session reopened", "locks", len(keys), "lost", len(lost))
	return lost
}

func (l *lockSet) close(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.sess.Close(ctx)
}
