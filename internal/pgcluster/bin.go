package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// envBinDir names the environment variable that, when set, overrides where
// the PostgreSQL server binaries (pg_ctl, initdb, postgres) are looked up.
const envBinDir = "DL_PG_BIN_DIR"

// debianPGRoot is where Debian and Ubuntu install one bin directory per
// PostgreSQL major version.
const debianPGRoot = "/usr/lib/postgresql"

// installLockPath serialises package installs between processes, so two
// test binaries starting on a fresh machine do not both run apt-get.
var installLockPath = filepath.Join(os.TempDir(), "dataloader-pg-install.lock")

// requiredBinaries must all be present in a bin directory for it to count.
var requiredBinaries = []string{"pg_ctl", "initdb", "postgres"}

// errNoBinaries is returned by FindBinDir when nothing was found.
var errNoBinaries = errors.New("PostgreSQL server binaries (pg_ctl, initdb, postgres) not found in " +
	debianPGRoot + "/*/bin or PATH; install them (Debian/Ubuntu: apt-get install postgresql) " +
	"or set " + envBinDir + " to their directory")

// FindBinDir returns the directory holding the PostgreSQL server binaries:
// $DL_PG_BIN_DIR when set, else the newest /usr/lib/postgresql/<major>/bin
// holding pg_ctl, initdb and postgres, else the directory of pg_ctl on PATH.
func FindBinDir() (string, error) {
	if dir := os.Getenv(envBinDir); dir != "" {
		if err := checkBinDir(dir); err != nil {
			return "", fmt.Errorf("%s=%s: %w", envBinDir, dir, err)
		}
		return dir, nil
	}
	for _, dir := range debianBinDirs() {
		if checkBinDir(dir) == nil {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if dir := filepath.Dir(p); checkBinDir(dir) == nil {
			return dir, nil
		}
	}
	return "", errNoBinaries
}

// debianBinDirs lists /usr/lib/postgresql/*/bin, newest major version first.
func debianBinDirs() []string {
	matches, _ := filepath.Glob(filepath.Join(debianPGRoot, "*", "bin"))
	version := func(dir string) float64 {
		v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
		if err != nil {
			return -1
		}
		return v
	}
	sort.SliceStable(matches, func(i, j int) bool { return version(matches[i]) > version(matches[j]) })
	return matches
}

// checkBinDir reports whether dir holds every required executable.
func checkBinDir(dir string) error {
	for _, name := range requiredBinaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("missing %s: %w", name, err)
		}
		if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("%s is not an executable file", filepath.Join(dir, name))
		}
	}
	return nil
}

// ensureBinDir finds the binaries, installing Debian's postgresql package
// first when they are missing and we are root.
func ensureBinDir(ctx context.Context, logger *slog.Logger) (string, error) {
	dir, err := FindBinDir()
	if err == nil || os.Getenv(envBinDir) != "" {
		return dir, err
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%w (not root, so not installing them automatically)", err)
	}
	if _, lerr := exec.LookPath("apt-get"); lerr != nil {
		return "", fmt.Errorf("%w (apt-get not available to install them)", err)
	}
	lock, lerr := acquireLock(ctx, installLockPath, logger)
	if lerr != nil {
		return "", lerr
	}
	defer lock.release()
	if dir, err := FindBinDir(); err == nil { // another process installed them meanwhile
		return dir, nil
	}
	logger.Warn("postgres binaries missing; installing Debian package postgresql with apt-get")
	start := time.Now()
	for _, args := range [][]string{
		{"update"},
		{"install", "-y", "--no-install-recommends", "postgresql"},
	} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, tail(out, 2048))
		}
	}
	logger.Info("installed postgresql package", "took", time.Since(start).Round(time.Millisecond))
	dir, err = FindBinDir()
	if err != nil {
		return "", fmt.Errorf("after installing postgresql: %w", err)
	}
	return dir, nil
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// binMajor returns the major version of the binaries in binDir, e.g. "15".
func binMajor(ctx context.Context, binDir string) (string, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "pg_ctl"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("pg_ctl --version: %w", err)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("pg_ctl --version: unrecognised output %q", bytes.TrimSpace(out))
	}
	return string(m[1]), nil
}

// matchBinDir makes sure binDir can run a data directory created by
// PostgreSQL dataMajor, switching to /usr/lib/postgresql/<dataMajor>/bin when
// the default pick is a different major version and that one is installed.
func matchBinDir(ctx context.Context, binDir, dataMajor, dataDir string) (string, error) {
	have, err := binMajor(ctx, binDir)
	if err != nil {
		return "", err
	}
	if have == dataMajor {
		return binDir, nil
	}
	if os.Getenv(envBinDir) == "" {
		alt := filepath.Join(debianPGRoot, dataMajor, "bin")
		if checkBinDir(alt) == nil {
			return alt, nil
		}
	}
	return "", fmt.Errorf("data directory %s was created by PostgreSQL %s but the binaries in %s are PostgreSQL %s: "+
		"install PostgreSQL %s (Debian: postgresql-%s), point %s at its bin directory, or remove the data directory",
		dataDir, dataMajor, binDir, have, dataMajor, dataMajor, envBinDir)
}

// tail returns at most the last n bytes of b, starting at a line boundary.
func tail(b []byte, n int) string {
	b = bytes.TrimRight(b, "\n")
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}
