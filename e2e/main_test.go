// Package e2e drives the real dataloader process (app.New on 127.0.0.1:0,
// a throwaway PostgreSQL database, the real workers) from a real browser:
// Debian's Chromium through playwright-go, offline (see
// ../../shared/notes/browser-e2e.md, and the Taskfile's chromium and
// pw-driver tasks).
//
// The browser and the app start once, in TestDashboard, whose subtests run
// the scenarios in order on the same app. Screenshots of the main pages, in
// the light and the dark scheme, go to e2e/artifacts/ (gitignored).
//
// Without Chromium or the driver the tests skip, naming what is missing;
// under CI=true they fail instead.
package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/playwright-community/playwright-go"

	"github.com/dataloader/dataloader/internal/app"
	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/config"
	"github.com/dataloader/dataloader/internal/pgtest"
	"github.com/dataloader/dataloader/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// chromiumPath is Debian's Chromium (the wrapper script).
const chromiumPath = "/usr/bin/chromium"

// Accounts of the test app.
const (
	adminUser    = "ada"
	adminPass    = "e2e-admin-password"
	viewerUser   = "victor"
	viewerPass   = "e2e-viewer-password"
	operatorUser = "olga"
	operatorPass = "e2e-operator-password"
)

// env is the app under test and the browser driving it.
type env struct {
	base    string
	store   *store.Store
	browser playwright.Browser
	expect  playwright.PlaywrightAssertions
}

// requireBrowser checks the prerequisites: the driver directory and
// Chromium. Missing ones skip the test locally and fail it under CI.
func requireBrowser(t *testing.T) {
	t.Helper()
	var missing []string
	dir := os.Getenv("PLAYWRIGHT_DRIVER_PATH")
	if dir == "" {
		missing = append(missing, "PLAYWRIGHT_DRIVER_PATH is not set")
	} else if _, err := os.Stat(filepath.Join(dir, "package", "cli.js")); err != nil {
		missing = append(missing, "no playwright driver in "+dir)
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		missing = append(missing, chromiumPath+" is missing")
	}
	if len(missing) == 0 {
		return
	}
	msg := "browser tests need Chromium and the playwright driver (go tool task e2e installs both): " + strings.Join(missing, "; ")
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// startBrowser starts the playwright driver and Chromium for the test.
func startBrowser(t *testing.T) playwright.Browser {
	t.Helper()
	pw, err := playwright.Run(&playwright.RunOptions{SkipInstallBrowsers: true, Verbose: false})
	if err != nil {
		t.Fatalf("start playwright: %v", err)
	}
	t.Cleanup(func() { _ = pw.Stop() })
	browser, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(chromiumPath),
		Headless:       playwright.Bool(true),
		Args: []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"},
	})
	if err != nil {
		t.Fatalf("launch chromium: %v", err)
	}
	t.Cleanup(func() { _ = browser.Close() })
	return browser
}

// startApp runs the whole product on 127.0.0.1:0 against a fresh database,
// with workers for queues demo (4 slots) and side (1 slot), and creates a
// viewer and an operator beside the bootstrap admin.
func startApp(t *testing.T) (base string, st *store.Store) {
	t.Helper()
	dsn := pgtest.DSN(t)
	vars := map[string]string{
		"DL_DB_DSN":                dsn,
		"DL_DATA_DIR":              t.TempDir(),
		"WORKERS_JSON":             `[{"queue":"demo","concurrency":4},{"queue":"side","concurrency":1}]`,
		"DL_HEARTBEAT_SEC":         "2",
		"DL_DEFAULT_LEASE_TTL_SEC": "20",
		"DL_POLL_INTERVAL_MS":      "500",
		"DL_CLAIM_BACKOFF_SEC":     "1",
		"DL_SHUTDOWN_GRACE_SEC":    "1",
		"DL_LOG_LEVEL":             "warn",
		"DL_LOG_FORMAT":            "text",
		"DL_ADMIN_USER":            adminUser,
		"DL_ADMIN_PASSWORD":        adminPass,
	}
	cfg, err := config.Load(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, log, app.Options{Listener: ln, Stderr: io.Discard})
	if err != nil {
		cancel()
		t.Fatalf("app: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("app exited with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("app did not stop within 30 s of its context ending")
		}
	})

	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st = store.New(pool)
	for _, u := range []struct {
		name, pw string
		role     auth.Role
	}{{viewerUser, viewerPass, auth.RoleViewer}, {operatorUser, operatorPass, auth.RoleOperator}} {
		hash, err := auth.HashPassword(u.pw)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.CreateUser(context.Background(), u.name, hash, u.role); err != nil {
			t.Fatalf("create user %s: %v", u.name, err)
		}
	}
	return "http://" + a.Addr().String(), st
}

// testWriter sends the app's warnings to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// artifact is the path of a screenshot file.
func artifact(name string) string {
	_ = os.MkdirAll("artifacts", 0o755)
	return filepath.Join("artifacts", name+".png")
}

func check(t *testing.T, err error, what string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}
