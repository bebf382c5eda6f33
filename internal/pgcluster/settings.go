package pgcluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// defaultPort is the socket-name suffix (.s.PGSQL.<port>) unless the
// settings pick another; nothing listens on TCP.
const defaultPort = 5432

// maxSocketPath is the longest socket path we hand to PostgreSQL; the kernel
// limit (sun_path) is 108 bytes including the terminating NUL.
const maxSocketPath = 100

// socketName is the file name PostgreSQL gives its socket in a directory.
func socketName(port int) string { return ".s.PGSQL." + strconv.Itoa(port) }

// socketDirFor picks the socket directory for a data directory: the data
// directory itself when the socket path fits, else a short directory under
// the temp dir named after a hash of the data directory path.
func socketDirFor(dataDir string, port int) (dir string, inDataDir bool, err error) {
	if len(filepath.Join(dataDir, socketName(port))) <= maxSocketPath {
		return dataDir, true, nil
	}
	sum := sha256.Sum256([]byte(dataDir))
	name := "dl-pg-" + hex.EncodeToString(sum[:8])
	for _, base := range []string{os.TempDir(), "/tmp"} {
		d := filepath.Join(base, name)
		if len(filepath.Join(d, socketName(port))) <= maxSocketPath {
			return d, false, nil
		}
	}
	return "", false, fmt.Errorf("no socket directory short enough for data directory %s (socket paths must be at most %d bytes)", dataDir, maxSocketPath)
}

// prepareSocketDir creates a fallback socket directory owned by u with mode
// 0700, or checks that an existing one is a real directory u owns (it lives
// in a shared temp dir, so anything else could be someone else's trap).
func prepareSocketDir(dir string, u *osUser) error {
	if err := os.Mkdir(dir, 0o700); err == nil {
		return u.chown(dir)
	} else if !os.IsExist(err) {
		return fmt.Errorf("create socket directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if !fi.IsDir() || !u.owns(fi) {
		return fmt.Errorf("socket directory %s exists but is not a directory owned by %s; remove it", dir, u)
	}
	return nil
}

// portFrom returns the port named in settings, or defaultPort.
func portFrom(settings map[string]string) (int, error) {
	v, ok := settings["port"]
	if !ok {
		return defaultPort, nil
	}
	p, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("setting port=%q: not a port number", v)
	}
	return p, nil
}

var settingNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// serverOptions renders the postgres command-line options that pg_ctl -o
// passes through /bin/sh: the caller's settings plus the ones that pin the
// server to its unix socket (those win over the caller's).
func serverOptions(settings map[string]string, sockDir string, port int) (string, error) {
	all := make(map[string]string, len(settings)+3)
	for k, v := range settings {
		if !settingNameRE.MatchString(k) {
			return "", fmt.Errorf("invalid setting name %q", k)
		}
		all[k] = v
	}
	all["listen_addresses"] = ""
	all["port"] = strconv.Itoa(port)
	// A list-valued setting: double-quote the element so commas and spaces
	// in the path survive.
	all["unix_socket_directories"] = `"` + strings.ReplaceAll(sockDir, `"`, `""`) + `"`
	names := make([]string, 0, len(all))
	for k := range all {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, 0, 2*len(names))
	for _, k := range names {
		parts = append(parts, "-c", shellQuote(k+"="+all[k]))
	}
	return strings.Join(parts, " "), nil
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// dsnValue quotes a keyword/value connection-string value when needed.
func dsnValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\\'") {
		return v
	}
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(v) + "'"
}

// keywordDSN builds a libpq/pgx keyword/value connection string.
func keywordDSN(sockDir string, port int, user, database string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable",
		dsnValue(sockDir), port, dsnValue(user), dsnValue(database))
}
