package pgcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// pidFile is what a running postmaster writes to <datadir>/postmaster.pid:
// line 1 its PID, line 4 the port, line 5 the first socket directory and
// line 8 its status ("ready", "starting", "stopping").
type pidFile struct {
	pid     int
	port    int
	sockDir string
	status  string
}

// readPidFile parses <dataDir>/postmaster.pid; an error wrapping
// os.ErrNotExist means no server claims the directory.
func readPidFile(dataDir string) (*pidFile, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	line := func(i int) string {
		if i < len(lines) {
			return strings.TrimSpace(lines[i])
		}
		return ""
	}
	pf := &pidFile{sockDir: line(4), status: line(7)}
	if pf.pid, err = strconv.Atoi(line(0)); err != nil || pf.pid <= 0 {
		return nil, fmt.Errorf("postmaster.pid: bad PID line %q", line(0))
	}
	pf.port, _ = strconv.Atoi(line(3)) // may be missing in a half-written file
	return pf, nil
}

// processAlive reports whether a process with this PID exists (possibly
// owned by another user) and is not a zombie: in containers whose init does
// not reap promptly, a killed postmaster lingers as one.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc: trust kill(0)
	}
	// Format: "pid (comm) state ...", where comm may contain spaces.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z' && stat[i+2] != 'X'
	}
	return true
}

// isOurPostmaster reports whether pid is a live postgres process that may be
// serving dataDir. A PID recycled by an unrelated process after a crash is
// not, so its stale pid file can be removed.
func isOurPostmaster(pid int, dataDir string) bool {
	if !processAlive(pid) {
		return false
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return true // no /proc: assume the worst, PostgreSQL checks again itself
	}
	if strings.TrimSpace(string(comm)) != "postgres" {
		return false
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return true // cannot see its directory (another user): assume it is ours
	}
	real, err := filepath.EvalSymlinks(dataDir)
	if err != nil {
		real = dataDir
	}
	return cwd == real || cwd == dataDir // the postmaster chdirs into its data directory
}
