package auth_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/pgtest"
	"github.com/dataloader/dataloader/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// signIn checks name/password the way the sign-in page does.
func signIn(t *testing.T, st *store.Store, name, pw string) bool {
	t.Helper()
	u, hash, err := st.UserCredentials(context.Background(), name)
	if err != nil {
		t.Fatalf("user %q: %v", name, err)
	}
	return auth.VerifyPassword(hash, pw) == nil && !u.Disabled
}

var bannerPassword = regexp.MustCompile(`password:\s+(\S+)`)

func TestBootstrapOnAnEmptyDatabaseCreatesAnAdminAndPrintsItOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(pgtest.Pool(t))
	var banner, logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	if err := auth.Bootstrap(ctx, st, "", "", &banner, log); err != nil {
		t.Fatal(err)
	}
	m := bannerPassword.FindStringSubmatch(banner.String())
	if m == nil || !strings.Contains(banner.String(), "user:      admin") {
		t.Fatalf("banner %q: want the user admin and its password", banner.String())
	}
	pw := m[1]
	if !signIn(t, st, "admin", pw) {
		t.Errorf("the printed password does not sign admin in")
	}
	if u, _, _ := st.UserCredentials(ctx, "admin"); u.Role != auth.RoleAdmin {
		t.Errorf("role %v, want admin", u.Role)
	}
	if strings.Contains(logs.String(), pw) {
		t.Errorf("the log holds the password: %s", logs.String())
	}
	if !strings.Contains(logs.String(), "created the first admin") {
		t.Errorf("log %q: want a line saying the admin was created", logs.String())
	}

	banner.Reset()
	if err := auth.Bootstrap(ctx, st, "", "", &banner, log); err != nil {
		t.Fatal(err)
	}
	if banner.Len() != 0 {
		t.Errorf("second start printed %q, want nothing: the credentials are shown once", banner.String())
	}
}

func TestBootstrapFromTheEnvironmentCreatesOrResetsTheAdmin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(pgtest.Pool(t))
	var banner, logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	if err := auth.Bootstrap(ctx, st, "root", "first-password", &banner, log); err != nil {
		t.Fatal(err)
	}
	if !signIn(t, st, "root", "first-password") {
		t.Fatal("root cannot sign in with DL_ADMIN_PASSWORD")
	}
	u, _, _ := st.UserCredentials(ctx, "root")
	if err := st.SetUserRole(ctx, u.ID, auth.RoleViewer); !errors.Is(err, store.ErrLastAdmin) {
		t.Errorf("demoting the only admin: got %v, want ErrLastAdmin", err)
	}
	// Another admin lets root be demoted and disabled; the next start with
	// a new password restores it.
	other, _ := auth.HashPassword("other-password")
	if err := st.CreateUser(ctx, "other", other, auth.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	if err := st.SetUserRole(ctx, u.ID, auth.RoleViewer); err != nil {
		t.Fatal(err)
	}
	if err := st.SetUserDisabled(ctx, u.ID, true); err != nil {
		t.Fatal(err)
	}
	if err := auth.Bootstrap(ctx, st, "root", "second-password", &banner, log); err != nil {
		t.Fatal(err)
	}
	if signIn(t, st, "root", "first-password") || !signIn(t, st, "root", "second-password") {
		t.Error("after the second start, want only the new password to work")
	}
	if u, _, _ := st.UserCredentials(ctx, "root"); u.Role != auth.RoleAdmin || u.Disabled {
		t.Errorf("root after restart: role %v disabled %v, want an enabled admin", u.Role, u.Disabled)
	}
	if banner.Len() != 0 {
		t.Errorf("banner %q, want none when the admin comes from the environment", banner.String())
	}
	for _, secret := range []string{"first-password", "second-password"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds a password: %s", logs.String())
		}
	}
	if n, _ := st.CountUsers(ctx); n != 2 {
		t.Errorf("%d users, want 2 (no generated admin when one is configured)", n)
	}
}

func TestBootstrapLeavesADatabaseWithUsersAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(pgtest.Pool(t))
	h, _ := auth.HashPassword("viewer-password")
	if err := st.CreateUser(ctx, "alice", h, auth.RoleViewer); err != nil {
		t.Fatal(err)
	}
	var banner bytes.Buffer
	if err := auth.Bootstrap(ctx, st, "", "", &banner, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if n, _ := st.CountUsers(ctx); n != 1 || banner.Len() != 0 {
		t.Errorf("%d users, banner %q; want alice alone and no banner", n, banner.String())
	}
}

func TestLoadOrCreateKeyFileKeepsOneKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "data", "session.key")
	k1, created, err := auth.LoadOrCreateKeyFile(path)
	if err != nil || !created || len(k1) != auth.KeyLen {
		t.Fatalf("first call: %d bytes, created %v, %v; want a new 32-byte key", len(k1), created, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	k2, created, err := auth.LoadOrCreateKeyFile(path)
	if err != nil || created || !bytes.Equal(k1, k2) {
		t.Errorf("second call: created %v, same key %v, %v; want the stored key", created, bytes.Equal(k1, k2), err)
	}
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := auth.LoadOrCreateKeyFile(path); err == nil {
		t.Error("corrupt key file: want an error, not a silently new key")
	}
}
