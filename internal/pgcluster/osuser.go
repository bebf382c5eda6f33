package pgcluster

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// serverOSUser is the unprivileged account the cluster runs as when this
// process is root (PostgreSQL refuses to run as root).
const serverOSUser = "postgres"

// osUser is the OS account that owns the data directory and runs
// initdb, pg_ctl and postgres.
type osUser struct {
	name   string
	home   string
	uid    uint32
	gid    uint32
	groups []uint32
	// switchTo is set when we are root and must drop to this user for
	// every PostgreSQL command.
	switchTo bool
}

// clusterUser returns the current user, or the postgres OS user when the
// current process is root.
func clusterUser() (*osUser, error) {
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("look up current user: %w", err)
		}
		return newOSUser(u, false)
	}
	u, err := user.Lookup(serverOSUser)
	if err != nil {
		return nil, fmt.Errorf("running as root, so PostgreSQL must run as the unprivileged %q OS user, "+
			"but looking it up failed (installing Debian's postgresql package creates it): %w", serverOSUser, err)
	}
	return newOSUser(u, true)
}

func newOSUser(u *user.User, switchTo bool) (*osUser, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: uid %q: %w", u.Username, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: gid %q: %w", u.Username, u.Gid, err)
	}
	o := &osUser{name: u.Username, home: u.HomeDir, uid: uint32(uid), gid: uint32(gid), switchTo: switchTo}
	ids, _ := u.GroupIds() // best effort: only used for permission checks
	for _, s := range ids {
		if g, err := strconv.ParseUint(s, 10, 32); err == nil {
			o.groups = append(o.groups, uint32(g))
		}
	}
	return o, nil
}

func (u *osUser) String() string { return fmt.Sprintf("%s (uid %d)", u.name, u.uid) }

func (u *osUser) inGroup(gid uint32) bool {
	if gid == u.gid {
		return true
	}
	for _, g := range u.groups {
		if g == gid {
			return true
		}
	}
	return false
}

// command builds an exec.Cmd that runs as u, in its own process group (so a
// terminal's Ctrl-C reaches only us, and we stop the server in order), with
// PG* variables removed from the environment so they cannot redirect it.
func (u *osUser) command(ctx context.Context, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") {
			continue
		}
		if u.switchTo && (strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "USER=") || strings.HasPrefix(kv, "LOGNAME=")) {
			continue
		}
		env = append(env, kv)
	}
	if u.switchTo {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}
		env = append(env, "HOME="+u.home, "USER="+u.name, "LOGNAME="+u.name)
	}
	cmd.Env = env
	return cmd
}

// chown hands path to u when we run as root; otherwise it is already ours.
func (u *osUser) chown(path string) error {
	if !u.switchTo {
		return nil
	}
	if err := os.Lchown(path, int(u.uid), int(u.gid)); err != nil {
		return fmt.Errorf("chown %s to %s: %w", path, u, err)
	}
	return nil
}

// chownTree hands a whole directory tree to u (root only).
func (u *osUser) chownTree(root string) error {
	if !u.switchTo {
		return nil
	}
	return filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return u.chown(p)
	})
}

// owns reports whether fi belongs to u.
func (u *osUser) owns(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == u.uid
}

// checkTraversable makes sure u can search (x permission) dir and every one
// of its ancestors, following symlinks to the real path. PostgreSQL runs as
// u and must reach its data directory.
func (u *osUser) checkTraversable(dir string) error {
	if !u.switchTo {
		return nil // it is our own user, and we created or reached dir ourselves
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", dir, err)
	}
	for d := real; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("stat %s: %w", d, err)
		}
		if !u.canSearch(fi) {
			st, _ := fi.Sys().(*syscall.Stat_t)
			var owner string
			if st != nil {
				owner = fmt.Sprintf(" owned by %d:%d", st.Uid, st.Gid)
			}
			return fmt.Errorf("PostgreSQL runs as the %s OS user, which cannot traverse %s (mode %s%s) "+
				"on the way to its data directory; put the data directory elsewhere or grant access "+
				"(e.g. chmod o+x %s)", u, d, fi.Mode(), owner, d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

func (u *osUser) canSearch(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true // cannot tell; let PostgreSQL report it
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == u.uid:
		return perm&0o100 != 0
	case u.inGroup(st.Gid):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}
