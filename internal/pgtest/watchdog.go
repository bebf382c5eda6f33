package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// watchdogScript waits until its stdin closes, which happens when the test
// binary exits however it exits (normal end, panic, os.Exit, SIGKILL), then
// shuts the cluster down (immediate mode, via SIGQUIT to the postmaster)
// and removes the temp dir. After a clean Main both are already gone.
const watchdogScript = `
cat >/dev/null
pidfile="$1/postmaster.pid"
if [ -f "$pidfile" ]; then
	pid=$(head -n 1 "$pidfile")
	case "$pid" in
	''|*[!0-9]*) ;;
	*)
		kill -QUIT "$pid" 2>/dev/null
		i=0
		while [ -f "$pidfile" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
		;;
	esac
fi
rm -rf "$2"
`

// watchdog is a background shell that cleans up after this process.
type watchdog struct {
	pipe *os.File // write end of its stdin; only this process holds it
	cmd  *exec.Cmd
}

// startWatchdog starts the watchdog for the cluster in dataDir, with tmpDir
// the directory to remove.
func startWatchdog(dataDir, tmpDir string) (*watchdog, error) {
	r, w, err := os.Pipe() // close-on-exec: the server and other children never inherit w
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "pgtest-watchdog", dataDir, tmpDir)
	cmd.Stdin = r // stdout and stderr: /dev/null, so `go test` does not wait for it
	// Own process group: a terminal's Ctrl-C stops the tests, not the cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("start cleanup watchdog: %w", err)
	}
	r.Close()
	go cmd.Wait() //nolint:errcheck // reaps it if it ends while we run
	return &watchdog{pipe: w, cmd: cmd}, nil
}

// release lets the watchdog run its (by then usually empty) cleanup and
// exit.
func (wd *watchdog) release() {
	if wd != nil && wd.pipe != nil {
		wd.pipe.Close()
		wd.pipe = nil
	}
}
