package e2e

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/playwright-community/playwright-go"

	"github.com/dataloader/dataloader/internal/job"
)

// session is one browser context (its own cookies) with one page.
type session struct {
	t    *testing.T
	e    *env
	ctx  playwright.BrowserContext
	page playwright.Page
	// navigations counts main-frame navigations (a live update must not
	// cause one); dialogs counts alert/confirm dialogs (a script injected
	// through job data would open one).
	navigations *atomic.Int64
	dialogs     *atomic.Int64
}

// on returns the session reporting to t (for subtests).
func (s *session) on(t *testing.T) *session {
	c := *s
	c.t = t
	return &c
}

// open starts a browser context in the given colour scheme at a laptop
// width.
func (e *env) open(t *testing.T, scheme *playwright.ColorScheme) *session {
	t.Helper()
	bctx, err := e.browser.NewContext(playwright.BrowserNewContextOptions{
		BaseURL:     playwright.String(e.base),
		ColorScheme: scheme,
		Viewport:    &playwright.Size{Width: 1366, Height: 900},
	})
	check(t, err, "new browser context")
	t.Cleanup(func() { _ = bctx.Close() })
	page, err := bctx.NewPage()
	check(t, err, "new page")
	page.SetDefaultTimeout(15_000)
	s := &session{t: t, e: e, ctx: bctx, page: page, navigations: new(atomic.Int64), dialogs: new(atomic.Int64)}
	page.OnFrameNavigated(func(f playwright.Frame) {
		if f == page.MainFrame() {
			s.navigations.Add(1)
		}
	})
	page.OnConsole(func(m playwright.ConsoleMessage) {
		if m.Type() == "error" || m.Type() == "warning" {
			t.Logf("browser console %s: %s", m.Type(), m.Text())
		}
	})
	page.OnDialog(func(d playwright.Dialog) {
		s.dialogs.Add(1)
		_ = d.Dismiss()
	})
	return s
}

// goTo navigates and waits for the page's load.
func (s *session) goTo(path string) {
	s.t.Helper()
	_, err := s.page.Goto(path)
	check(s.t, err, "go to %s", path)
}

// signIn signs in through the /login form.
func (s *session) signIn(user, pw string) {
	s.t.Helper()
	s.goTo("/")
	if !strings.Contains(s.page.URL(), "/login") {
		s.t.Fatalf("an anonymous visit to / landed on %s, want the sign-in page", s.page.URL())
	}
	check(s.t, s.page.Locator("[data-testid=login-username]").Fill(user), "fill username")
	check(s.t, s.page.Locator("[data-testid=login-password]").Fill(pw), "fill password")
	check(s.t, s.page.Locator("[data-testid=login-submit]").Click(), "submit sign-in")
	s.see("[data-testid=user-name]", user)
}

// loc is a locator on the page.
func (s *session) loc(sel string) playwright.Locator { return s.page.Locator(sel) }

// see waits until the element shows text (a substring).
func (s *session) see(sel, text string) {
	s.t.Helper()
	check(s.t, s.e.expect.Locator(s.loc(sel).First()).ToContainText(text), "%s shows %q", sel, text)
}

// visible waits until the element is visible.
func (s *session) visible(sel string) {
	s.t.Helper()
	check(s.t, s.e.expect.Locator(s.loc(sel).First()).ToBeVisible(), "%s visible", sel)
}

// absent asserts the page has no element matching sel.
func (s *session) absent(sel string) {
	s.t.Helper()
	check(s.t, s.e.expect.Locator(s.loc(sel)).ToHaveCount(0), "no %s", sel)
}

func (s *session) click(sel string) {
	s.t.Helper()
	check(s.t, s.loc(sel).First().Click(), "click %s", sel)
}

func (s *session) count(sel string) int {
	s.t.Helper()
	n, err := s.loc(sel).Count()
	check(s.t, err, "count %s", sel)
	return n
}

func (s *session) attr(sel, name string) string {
	s.t.Helper()
	v, err := s.loc(sel).First().GetAttribute(name)
	check(s.t, err, "attribute %s of %s", name, sel)
	return v
}

// status waits for the job page's status badge to read one of want.
func (s *session) status(want ...string) string {
	s.t.Helper()
	sel := "[data-testid=job-summary] [data-testid=status]"
	deadline := time.Now().Add(20 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		got = s.attr(sel, "data-status")
		for _, w := range want {
			if got == w {
				return got
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("job status: got %q after 20 s, want one of %v", got, want)
	return ""
}

// screenshot saves the page as artifacts/<name>-<scheme>.png.
func (s *session) screenshot(name, scheme string) {
	s.t.Helper()
	_, err := s.page.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(artifact(name + "-" + scheme)),
		FullPage: playwright.Bool(true)})
	check(s.t, err, "screenshot %s", name)
}

// csrf reads the page's CSRF token.
func (s *session) csrf() string {
	return s.attr("meta[name=csrf-token]", "content")
}

// post sends a form post with the session's cookies and CSRF header, as a
// script in the page could, and returns the status.
func (s *session) post(path string, form map[string]string) int {
	s.t.Helper()
	fields := map[string]any{}
	for k, v := range form {
		fields[k] = v
	}
	resp, err := s.page.Request().Post(path, playwright.APIRequestContextPostOptions{
		Headers:      map[string]string{"X-CSRF-Token": s.csrf()},
		Form:         fields,
		MaxRedirects: playwright.Int(0),
	})
	check(s.t, err, "post %s", path)
	return resp.Status()
}

// trigger enqueues a job straight in the store.
func (e *env) trigger(t *testing.T, queue, task, lockKey string, args any) uuid.UUID {
	t.Helper()
	raw, err := json.Marshal(args)
	check(t, err, "args")
	res, err := e.store.Trigger(context.Background(), job.TriggerParams{Queue: queue, Task: task, LockKey: lockKey,
		Args: raw}, 60)
	check(t, err, "trigger")
	return res.JobID
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func jobPath(id uuid.UUID) string { return "/jobs/" + url.PathEscape(id.String()) }
