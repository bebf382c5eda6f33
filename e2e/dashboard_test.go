package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/playwright-community/playwright-go"
)

// TestDashboard starts the browser and the app once and walks the
// operator's and the viewer's paths through the dashboard in order.
func TestDashboard(t *testing.T) {
	requireBrowser(t)
	browser := startBrowser(t)
	base, st := startApp(t)
	e := &env{base: base, store: st, browser: browser, expect: playwright.NewPlaywrightAssertions(15_000)}
	admin := e.open(t, playwright.ColorSchemeLight)

	t.Run("SignInLandsOnTheQueues", func(t *testing.T) {
		s := admin.on(t)
		s.signIn(adminUser, adminPass)
		if !strings.HasSuffix(s.page.URL(), "/queues") {
			t.Errorf("after sign-in: at %s, want /queues", s.page.URL())
		}
		s.see("[data-testid=user-role]", "admin")
		s.visible("[data-testid=queue-row][data-queue=demo]")
	})

	var watched uuid.UUID
	t.Run("TriggerFromTheFormThenWatchProgressAndTimelineLive", func(t *testing.T) {
		s := admin.on(t)
		s.goTo("/trigger")
		check(t, s.loc("[data-testid=trigger-queue]").Fill("demo"), "queue")
		check(t, s.loc("[data-testid=trigger-task]").Fill("demo.sleep"), "task")
		check(t, s.loc("[data-testid=trigger-lock_key]").Fill("e2e-watch"), "lock key")
		check(t, s.loc("[data-testid=trigger-args]").Fill(`{"chunks": 24, "chunk_ms": 350}`), "args")
		s.click("[data-testid=trigger-submit]")
		s.visible("[data-testid=trigger-job-link]")
		id, err := uuid.Parse(strings.TrimSpace(must(s.loc("[data-testid=trigger-job-link]").TextContent())))
		check(t, err, "job id in the result")
		watched = id
		s.click("[data-testid=trigger-job-link]")
		s.see("[data-testid=job-id]", id.String())
		s.status("running")

		url, navs := s.page.URL(), s.navigations.Load()
		bar := "[data-testid=job-summary] [data-testid=progress-bar]"
		s.visible(bar)
		first := atoi(s.attr(bar, "value"))
		events := s.count("#job-timeline > li.ev")
		eventually(t, 10*time.Second, "progress advances without a reload", func() bool {
			return atoi(s.attr(bar, "value")) >= first+3
		})
		eventually(t, 10*time.Second, "the timeline grows without a reload", func() bool {
			return s.count("#job-timeline > li.ev") > events
		})
		if s.page.URL() != url || s.navigations.Load() != navs {
			t.Errorf("the page navigated (url %s → %s, navigations %d → %d); updates must come live", url,
				s.page.URL(), navs, s.navigations.Load())
		}
		s.visible("[data-testid=progress-eta]")
		s.visible("[data-testid=lease]")
		s.screenshot("job-running", "light")
	})

	t.Run("CancelARunningJob", func(t *testing.T) {
		s := admin.on(t)
		if watched == uuid.Nil {
			t.Skip("no job from the previous step")
		}
		s.click("[data-testid=job-cancel]")
		s.status("canceled")
		s.visible("#job-timeline [data-kind=canceled]")
		s.absent("[data-testid=job-cancel]")
		s.visible("[data-testid=job-retry]")
	})

	t.Run("RetryAFailedJob", func(t *testing.T) {
		s := admin.on(t)
		s.goTo("/trigger")
		check(t, s.loc("[data-testid=trigger-queue]").Fill("demo"), "queue")
		check(t, s.loc("[data-testid=trigger-task]").Fill("demo.sleep"), "task")
		check(t, s.loc("[data-testid=trigger-lock_key]").Fill("e2e-retry"), "lock key")
		check(t, s.loc("[data-testid=trigger-max_attempts]").Fill("1"), "max attempts")
		check(t, s.loc("[data-testid=trigger-args]").Fill(`{"fail_attempts": 1, "chunks": 20, "chunk_ms": 200}`), "args")
		s.click("[data-testid=trigger-submit]")
		s.click("[data-testid=trigger-job-link]")
		s.status("failed")
		s.see("[data-testid=job-error]", "fails on purpose")
		s.click("[data-testid=job-retry]")
		s.status("queued", "running")
		s.visible("#job-timeline [data-kind=retried]")
		s.status("running")
	})

	t.Run("TriggerFormNamesTheFieldsAtFault", func(t *testing.T) {
		s := admin.on(t)
		s.goTo("/trigger")
		check(t, s.loc("[data-testid=trigger-queue]").Fill("demo"), "queue")
		check(t, s.loc("[data-testid=trigger-task]").Fill("demo.sleep"), "task")
		check(t, s.loc("[data-testid=trigger-args]").Fill(`{"chunks": `), "args")
		check(t, s.loc("[data-testid=trigger-priority]").Fill("soon"), "priority")
		s.click("[data-testid=trigger-submit]")
		s.see("[data-testid=error-args]", "JSON")
		s.see("[data-testid=error-priority]", "whole number")
		s.screenshot("trigger-errors", "light")
	})

	t.Run("BulkCancelSelectedRowsThenTheWholeFilteredSet", func(t *testing.T) {
		s := admin.on(t)
		var ids []uuid.UUID
		for i := 0; i < 6; i++ {
			ids = append(ids, e.trigger(t, "bulk", "e2e.noop", fmt.Sprintf("bulk-%d", i), map[string]int{"n": i}))
		}
		other := e.trigger(t, "bulk-other", "e2e.noop", "other", map[string]int{})
		s.goTo("/jobs?queue=bulk")
		check(t, e.expect.Locator(s.loc("[data-testid=job-row]")).ToHaveCount(6), "six rows")
		s.click(fmt.Sprintf("[data-job-id=%q] [data-testid=row-select]", ids[0].String()))
		s.click(fmt.Sprintf("[data-job-id=%q] [data-testid=row-select]", ids[1].String()))
		s.click("[data-testid=bulk-cancel-selected]")
		s.see("[data-testid=bulk-question]", "Cancel 2 selected jobs")
		s.click("[data-testid=bulk-confirm]")
		s.see("[data-testid=bulk-done]", "Canceled 2 jobs")
		for _, id := range ids[:2] {
			check(t, e.expect.Locator(s.loc(fmt.Sprintf("[data-job-id=%q]", id.String()))).ToHaveAttribute("data-status", "canceled"),
				"row of %s turns canceled live", id)
		}
		s.click("[data-testid=bulk-cancel-filter]")
		s.see("[data-testid=bulk-question]", "Cancel 4 queued or running jobs matching the filter")
		s.screenshot("jobs-bulk-confirm", "light")
		s.click("[data-testid=bulk-confirm]")
		s.see("[data-testid=bulk-done]", "Canceled 4 jobs")
		check(t, e.expect.Locator(s.loc("[data-testid=job-row][data-status=canceled]")).ToHaveCount(6), "all six canceled")
		check(t, e.expect.Locator(s.loc("[data-testid=jobs-newer]")).ToBeHidden(), "no newer jobs yet")
		e.trigger(t, "bulk", "e2e.noop", "bulk-late", map[string]int{})
		s.visible("[data-testid=jobs-newer]")
		s.goTo(jobPath(other))
		s.status("queued") // outside the filter: untouched
	})

	t.Run("PauseAndResumeAQueue", func(t *testing.T) {
		s := admin.on(t)
		s.goTo("/queues")
		row := "[data-testid=queue-row][data-queue=side]"
		s.click(row + " [data-testid=queue-pause]")
		s.visible(row + " [data-testid=queue-paused]")
		s.visible(row + " [data-testid=queue-resume]")

		id := e.trigger(t, "side", "demo.sleep", "e2e-side", map[string]int{"chunks": 2, "chunk_ms": 100})
		s.goTo(jobPath(id))
		s.status("queued")
		s.visible("[data-testid=wait-reason][data-kind=paused]")
		time.Sleep(time.Second) // a paused queue's worker must not take it
		s.status("queued")

		s.goTo("/queues")
		s.click(row + " [data-testid=queue-resume]")
		s.visible(row + " [data-testid=queue-pause]")
		s.absent(row + " [data-testid=queue-paused]")
		s.goTo(jobPath(id))
		s.status("succeeded")
	})

	t.Run("ArgsWithMarkupShowAsText", func(t *testing.T) {
		s := admin.on(t)
		payload := `<script>alert(1)</script><img src=x onerror=alert(2)>`
		id := e.trigger(t, "bulk", "e2e.noop", "xss", map[string]string{"note": payload})
		s.goTo(jobPath(id))
		s.see("[data-testid=job-args]", payload)
		s.goTo("/jobs?queue=bulk&q=" + "alert(1)")
		s.visible(fmt.Sprintf("[data-job-id=%q]", id.String()))
		time.Sleep(500 * time.Millisecond)
		if n := s.dialogs.Load(); n != 0 {
			t.Errorf("%d dialogs opened: job data ran as script", n)
		}
		if n := s.count("#main script, #main img[src=x]"); n != 0 {
			t.Errorf("%d script/img elements made from job data, want 0", n)
		}
	})

	t.Run("ViewerSeesNoActionsAndIsRefusedWhenForcing", func(t *testing.T) {
		s := e.open(t, playwright.ColorSchemeLight)
		s.signIn(viewerUser, viewerPass)
		queued := e.trigger(t, "bulk", "e2e.noop", "viewer", map[string]int{})
		s.goTo(jobPath(queued))
		s.status("queued")
		s.absent("[data-testid=job-cancel]")
		s.absent("[data-testid=job-retry]")
		s.goTo("/jobs?queue=bulk")
		s.visible("[data-testid=job-row]")
		s.absent("[data-testid=row-cancel]")
		s.absent("[data-testid=row-select]")
		s.absent("[data-testid=bulk-form]")
		s.goTo("/queues")
		s.visible("[data-testid=queue-row]")
		s.absent("[data-testid=queue-pause]")
		s.absent("[data-testid=nav-trigger]")
		s.absent("[data-testid=nav-users]")
		for _, p := range []struct {
			path string
			form map[string]string
		}{
			{jobPath(queued) + "/cancel", nil},
			{jobPath(watched) + "/retry", nil},
			{"/queues/demo/pause", nil},
			{"/jobs/bulk", map[string]string{"op": "cancel-filter", "queue": "bulk", "confirm": "yes"}},
			{"/trigger", map[string]string{"queue": "demo", "task": "demo.sleep", "lock_key": "x"}},
		} {
			if got := s.post(p.path, p.form); got != http.StatusForbidden {
				t.Errorf("viewer POST %s: got %d, want 403", p.path, got)
			}
		}
		s.goTo(jobPath(queued))
		s.status("queued") // still: nothing was done

		// Control: the same request with an operator's session and token
		// goes through, so the refusals above were about the role.
		o := e.open(t, playwright.ColorSchemeLight)
		o.signIn(operatorUser, operatorPass)
		if got := o.post(jobPath(queued)+"/cancel", nil); got != http.StatusSeeOther {
			t.Errorf("operator POST cancel: got %d, want 303", got)
		}
		o.goTo(jobPath(queued))
		o.status("canceled")
	})

	t.Run("StreamCutShowsThePollingNoticeAndPollingKeepsThePageCurrent", func(t *testing.T) {
		s := admin.on(t)
		block := func(r playwright.Route) { _ = r.Abort() }
		check(t, s.page.Route("**/live?**", block), "route")
		id := e.trigger(t, "bulk", "e2e.noop", "poll", map[string]int{})
		s.goTo(jobPath(id))
		s.visible("[data-testid=live-notice]")
		s.see("[data-testid=live-notice]", "refreshing every 5 s")
		s.screenshot("job-polling", "light")
		_, err := e.store.Cancel(t.Context(), id, "test")
		check(t, err, "cancel behind the page's back")
		s.status("canceled") // picked up by the 5 s poll
		check(t, s.page.Unroute("**/live?**"), "unroute")
		check(t, e.expect.Locator(s.loc("[data-testid=live-notice]")).ToBeHidden(), "notice hidden once the stream is back")
	})

	t.Run("Screenshots", func(t *testing.T) {
		// Something for every page: a key held with waiters, jobs running.
		for i := 0; i < 3; i++ {
			e.trigger(t, "demo", "demo.sleep", "shared-key", map[string]int{"chunks": 30, "chunk_ms": 300})
		}
		e.trigger(t, "demo", "demo.sleep", "e2e-fail", map[string]string{"fail": "upstream answered 503"})
		shots := []struct{ name, path, ready string }{
			{"queues", "/queues", "[data-testid=queue-row]"},
			{"jobs", "/jobs", "[data-testid=job-row]"},
			{"job", jobPath(watched), "[data-testid=job-summary]"},
			{"locks", "/locks", "[data-testid=lock-row]"},
			{"workers", "/workers", "[data-testid=worker-row]"},
			{"trigger", "/trigger", "[data-testid=trigger-form]"},
		}
		for _, scheme := range []struct {
			name string
			cs   *playwright.ColorScheme
		}{{"light", playwright.ColorSchemeLight}, {"dark", playwright.ColorSchemeDark}} {
			s := admin.on(t)
			check(t, s.page.EmulateMedia(playwright.PageEmulateMediaOptions{ColorScheme: scheme.cs}), "scheme")
			for _, sh := range shots {
				s.goTo(sh.path)
				s.visible(sh.ready)
				s.screenshot(sh.name, scheme.name)
			}
		}
		s := admin.on(t)
		check(t, s.page.EmulateMedia(playwright.PageEmulateMediaOptions{ColorScheme: playwright.ColorSchemeLight}), "scheme")
		check(t, s.page.SetViewportSize(390, 844), "phone width")
		for _, sh := range shots[:3] {
			s.goTo(sh.path)
			s.visible(sh.ready)
			s.screenshot(sh.name+"-phone", "light")
		}
		check(t, s.page.SetViewportSize(1366, 900), "laptop width")
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
