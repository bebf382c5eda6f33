package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

const (
	pgCtlTimeoutSecs = "60"             // pg_ctl -t: wait this long for start/stop
	busyWait         = 60 * time.Second // wait for a live postmaster that does not answer yet
	maxLogSize       = 16 << 20         // rotate server.log past this size at start
	startAttempts    = 10               // tries when a crashed server's shared memory lingers
)

// mkdirAllTraversable creates the data directory's parent (0755).
func mkdirAllTraversable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create parent of data directory: %w", err)
	}
	return nil
}

// findRunning reports whether a server already runs on the data directory
// and answers; if so it records where its socket is. A postmaster.pid left
// by a dead server is removed. Runs under the start lock.
func (c *Cluster) findRunning(ctx context.Context) (bool, error) {
	deadline := time.Now().Add(busyWait)
	for {
		pf, err := readPidFile(c.dataDir)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			c.logger.Warn("removing unreadable postmaster.pid", "err", err)
			return false, c.removePidFile()
		}
		sockDir, port := pf.sockDir, pf.port
		if sockDir == "" || port == 0 {
			port = c.port
			if sockDir, _, err = socketDirFor(c.dataDir, port); err != nil {
				return false, err
			}
		}
		if answers(ctx, sockDir, port) {
			c.sockDir, c.port = sockDir, port
			return true, nil
		}
		if !isOurPostmaster(pf.pid, c.dataDir) {
			c.logger.Warn("removing stale postmaster.pid left by a dead server", "pid", pf.pid)
			removeStaleSocketLock(sockDir, port, pf.pid)
			return false, c.removePidFile()
		}
		// A live postmaster that does not accept connections yet: starting,
		// recovering after a crash, or shutting down. Wait for it.
		if time.Now().After(deadline) {
			return false, fmt.Errorf("postgres (PID %d, status %q) holds the data directory but has not accepted connections for %s",
				pf.pid, pf.status, busyWait)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Cluster) removePidFile() error {
	if err := os.Remove(filepath.Join(c.dataDir, "postmaster.pid")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale postmaster.pid: %w", err)
	}
	return nil
}

// removeStaleSocketLock removes the socket lock file a dead postmaster left
// behind when it names that postmaster or another dead process. PostgreSQL
// removes such files itself, except when the dead PID is still a zombie
// that a container's init has not reaped yet.
func removeStaleSocketLock(sockDir string, port int, deadPID int) {
	path := filepath.Join(sockDir, socketName(port)+".lock")
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err == nil && (pid == deadPID || !processAlive(pid)) {
		_ = os.Remove(path)
	}
}

// answers reports whether a server is up on the socket: any answer but
// "cannot connect now" (starting up or shutting down) counts.
func answers(ctx context.Context, sockDir string, port int) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, keywordDSN(sockDir, port, superuser, "postgres")+" connect_timeout=3")
	if err == nil {
		conn.Close(ctx)
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code != "57P03"
}

// launch initialises the data directory if needed and starts the server.
func (c *Cluster) launch(ctx context.Context, settings map[string]string) error {
	binDir, err := ensureBinDir(ctx, c.logger)
	if err != nil {
		return err
	}
	u, err := clusterUser()
	if err != nil {
		return err
	}
	c.user = u
	if err := u.checkTraversable(filepath.Dir(c.dataDir)); err != nil {
		return err
	}
	version, err := os.ReadFile(filepath.Join(c.dataDir, "PG_VERSION"))
	switch {
	case err == nil:
		if binDir, err = matchBinDir(ctx, binDir, strings.TrimSpace(string(version)), c.dataDir); err != nil {
			return err
		}
		if err := c.fixOwner(); err != nil {
			return err
		}
	case errors.Is(err, fs.ErrNotExist):
		if err := c.initdb(ctx, binDir, isOff(settings["fsync"])); err != nil {
			return err
		}
	default:
		return fmt.Errorf("read PG_VERSION: %w", err)
	}
	c.binDir = binDir

	sockDir, inDataDir, err := socketDirFor(c.dataDir, c.port)
	if err != nil {
		return err
	}
	if !inDataDir {
		if err := prepareSocketDir(sockDir, u); err != nil {
			return err
		}
	}
	c.sockDir = sockDir
	opts, err := serverOptions(settings, sockDir, c.port)
	if err != nil {
		return err
	}
	return c.pgCtlStart(ctx, opts)
}

// fixOwner hands an existing data directory to the cluster user when we are
// root and it belongs to someone else (e.g. it was created by a non-root
// run); PostgreSQL insists on owning it.
func (c *Cluster) fixOwner() error {
	fi, err := os.Stat(c.dataDir)
	if err != nil {
		return err
	}
	if !c.user.switchTo || c.user.owns(fi) {
		return nil
	}
	c.logger.Warn("data directory not owned by the cluster user; changing its owner", "user", c.user.name)
	return c.user.chownTree(c.dataDir)
}

// initdb creates the cluster in a scratch directory beside the data
// directory and renames it into place, so an interrupted initdb never
// leaves a half-made data directory behind.
func (c *Cluster) initdb(ctx context.Context, binDir string, noSync bool) error {
	if entries, err := os.ReadDir(c.dataDir); err == nil && len(entries) > 0 {
		return fmt.Errorf("data directory exists, is not empty and has no PG_VERSION: not a PostgreSQL data directory")
	}
	tmp := c.dataDir + ".initdb"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("remove leftover %s: %w", tmp, err)
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	if err := c.user.chown(tmp); err != nil {
		return err
	}
	args := []string{"-D", tmp, "--auth=trust", "-U", superuser, "--encoding=UTF8", "--locale=C"}
	if noSync {
		args = append(args, "--no-sync")
	}
	t0 := time.Now()
	out, err := c.user.command(ctx, filepath.Join(binDir, "initdb"), args...).CombinedOutput()
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("initdb: %w\n%s", err, tail(out, 4096))
	}
	if err := os.Rename(tmp, c.dataDir); err != nil {
		return fmt.Errorf("move initialised data directory into place: %w", err)
	}
	c.logger.Info("initdb done", "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// pgCtlStart runs pg_ctl start and waits for the server to accept
// connections. After a crash, the dead server's children may hold its
// shared memory for a moment; that start failure is retried.
func (c *Cluster) pgCtlStart(ctx context.Context, opts string) error {
	logPath := filepath.Join(c.dataDir, "server.log")
	if fi, err := os.Stat(logPath); err == nil && fi.Size() > maxLogSize {
		_ = os.Rename(logPath, logPath+".1")
	}
	for attempt := 1; ; attempt++ {
		var offset int64
		if fi, err := os.Stat(logPath); err == nil {
			offset = fi.Size()
		}
		cmd := c.user.command(ctx, filepath.Join(c.binDir, "pg_ctl"),
			"-D", c.dataDir, "-w", "-t", pgCtlTimeoutSecs, "-l", logPath, "-o", opts, "start")
		out, err := cmd.CombinedOutput()
		if err == nil {
			return nil
		}
		serverLog := readFrom(logPath, offset)
		if attempt < startAttempts && bytes.Contains(serverLog, []byte("pre-existing shared memory block")) && ctx.Err() == nil {
			c.logger.Info("shared memory of a crashed server still in use; retrying start", "attempt", attempt)
			time.Sleep(500 * time.Millisecond)
			continue
		}
		return fmt.Errorf("pg_ctl start: %w\n%s\n--- %s (tail) ---\n%s", err, tail(out, 2048), logPath, tail(serverLog, 4096))
	}
}

// pgCtlStop runs a fast shutdown; a server that is already gone is fine.
func (c *Cluster) pgCtlStop(ctx context.Context) error {
	if pf, err := readPidFile(c.dataDir); errors.Is(err, fs.ErrNotExist) || (err == nil && !processAlive(pf.pid)) {
		c.logger.Warn("postgres was already stopped (crashed or stopped by someone else)")
		return nil
	}
	out, err := c.user.command(ctx, filepath.Join(c.binDir, "pg_ctl"),
		"-D", c.dataDir, "-m", "fast", "-w", "-t", pgCtlTimeoutSecs, "stop").CombinedOutput()
	if err == nil {
		return nil
	}
	pf, perr := readPidFile(c.dataDir)
	if errors.Is(perr, fs.ErrNotExist) || (perr == nil && !processAlive(pf.pid)) {
		c.logger.Warn("postgres was already stopped", "pg_ctl", tail(out, 512))
		return nil
	}
	return fmt.Errorf("pg_ctl stop: %w\n%s", err, tail(out, 2048))
}

// readFrom returns the file's content from offset on (empty on error).
func readFrom(path string, offset int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(f)
	return b
}

// isOff reports whether a boolean setting value means off.
func isOff(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "off", "false", "no", "0", "of", "f", "n":
		return true
	}
	return false
}
