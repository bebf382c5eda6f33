package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"
)

// fileLock is an flock(2) lock held on an open file. Locks belong to the
// open file, so two opens in one process exclude each other like two
// processes do.
type fileLock struct {
	f *os.File
}

// openLockFile opens (creating) path read-only, which is enough for flock
// and works for other users' lock files too.
func openLockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	return f, nil
}

// acquireLock takes an exclusive lock on path, waiting until it is free or
// ctx ends.
func acquireLock(ctx context.Context, path string, logger *slog.Logger) (*fileLock, error) {
	return lockWait(ctx, path, syscall.LOCK_EX, logger)
}

// acquireShared takes a shared lock on path, waiting until no exclusive
// holder remains or ctx ends.
func acquireShared(ctx context.Context, path string, logger *slog.Logger) (*fileLock, error) {
	return lockWait(ctx, path, syscall.LOCK_SH, logger)
}

func lockWait(ctx context.Context, path string, how int, logger *slog.Logger) (*fileLock, error) {
	f, err := openLockFile(path)
	if err != nil {
		return nil, err
	}
	logged := false
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return &fileLock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !logged {
			logger.Info("waiting for lock held by another process", "lock", path)
			logged = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for lock %s: %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tryExclusive takes an exclusive lock on path without waiting; ok is false
// when another holder (shared or exclusive) has it.
func tryExclusive(path string) (l *fileLock, ok bool, err error) {
	f, err := openLockFile(path)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	return &fileLock{f: f}, true, nil
}

// release drops the lock; it is safe on a nil lock and safe to call twice.
func (l *fileLock) release() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
}
