package main_test

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dataloader/dataloader/internal/pgtest"
)

// web runs the binary with args against dsn and returns its exit code,
// stdout and stderr.
func web(t *testing.T, dsn, stdin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(append(os.Environ(), "DL_DB_DSN="+dsn, "DL_DATA_DIR="+t.TempDir()), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// operatorToken creates an operator API token with `web token add` and
// returns its secret.
func operatorToken(t *testing.T, dsn string) string {
	t.Helper()
	code, out, errs := web(t, dsn, "", nil, "token", "add", "test", "--role", "operator")
	secret := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(secret, "dl_") {
		t.Fatalf("web token add: exit %d, stdout %q, stderr %s", code, out, errs)
	}
	return secret
}

func TestUserSubcommandAddsAndListsUsers(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	if code, out, errs := web(t, dsn, "stdin-password\n", nil, "user", "add", "alice", "--role", "admin"); code != 0 ||
		!strings.Contains(out, "user alice created with role admin") {
		t.Fatalf("user add: exit %d, stdout %q, stderr %s", code, out, errs)
	}
	if code, _, errs := web(t, dsn, "", []string{"DL_ADMIN_PASSWORD=env-password"}, "user", "add", "bob"); code != 0 {
		t.Fatalf("user add with DL_ADMIN_PASSWORD: exit %d, stderr %s", code, errs)
	}
	code, out, _ := web(t, dsn, "", nil, "user", "list")
	if code != 0 || !regexp.MustCompile(`alice\s+admin\s+active`).MatchString(out) || !regexp.MustCompile(`bob\s+viewer\s+active`).MatchString(out) {
		t.Errorf("user list: exit %d\n%s", code, out)
	}
	if code, _, errs := web(t, dsn, "", nil, "user", "frobnicate"); code != 2 || !strings.Contains(errs, "usage:") {
		t.Errorf("bad subcommand: exit %d, stderr %q; want 2 and the usage", code, errs)
	}
	if code, _, errs := web(t, dsn, "short\n", nil, "user", "add", "carol"); code != 1 || !strings.Contains(errs, "password must be") {
		t.Errorf("short password: exit %d, stderr %q; want 1 and why", code, errs)
	}
}

// bannerPassword finds the generated password in the first-admin banner.
var bannerPassword = regexp.MustCompile(`password:\s+(\S+)`)

func TestFirstStartOnAnEmptyDatabasePrintsGeneratedAdminCredentialsOnce(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	dataDir := t.TempDir()
	p := start(t, "DL_DB_DSN="+dsn, "DL_LISTEN_ADDR=127.0.0.1:0", "DL_DATA_DIR="+dataDir, "WORKERS_JSON=[]")
	m := bannerPassword.FindStringSubmatch(p.stderr.String())
	if m == nil || !strings.Contains(p.stderr.String(), "user:      admin") {
		t.Fatalf("stderr holds no admin banner:\n%s", p.stderr)
	}
	if n := strings.Count(p.stderr.String(), m[1]); n != 1 {
		t.Errorf("the password appears %d times on stderr, want once (in the banner, not in log lines)", n)
	}
	if fi, err := os.Stat(filepath.Join(dataDir, "session.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("session key file: %v, want <DL_DATA_DIR>/session.key with mode 0600", err)
	}

	// The printed password signs in.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout: 10 * time.Second}
	res, err := client.Get("http://" + p.addr + "/login")
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	_, _ = page.ReadFrom(res.Body)
	res.Body.Close()
	csrf := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindStringSubmatch(page.String())
	if csrf == nil {
		t.Fatalf("no CSRF field on the sign-in page")
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+p.addr+"/login",
		strings.NewReader("username=admin&password="+m[1]+"&_csrf="+csrf[1]))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range res.Cookies() {
		req.AddCookie(c)
	}
	res, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Errorf("sign in with the printed password: %d, want 303", res.StatusCode)
	}
}
