package web_test

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/job"
)

// sseEvent is one server-sent event as a browser would see it.
type sseEvent struct{ id, event, data string }

// stream opens an SSE stream and delivers its events until the test ends
// or close is called; the channel closes when the stream ends.
func (b *browser) stream(path string, hdr ...string) (<-chan sseEvent, func()) {
	b.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := b.c.Do(req)
	if err != nil {
		cancel()
		b.t.Fatalf("open stream %s: %v", path, err)
	}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		res.Body.Close()
		b.t.Fatalf("open stream %s: status %d, type %q", path, res.StatusCode, res.Header.Get("Content-Type"))
	}
	out := make(chan sseEvent, 256)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" || len(data) > 0 {
					ev.data = strings.Join(data, "\n")
					out <- ev
				}
				ev, data = sseEvent{}, nil
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				data = append(data, line[6:])
			}
		}
	}()
	b.t.Cleanup(cancel)
	return out, cancel
}

// next waits for the next event named name whose data holds want.
func next(t *testing.T, c <-chan sseEvent, name, want string) sseEvent {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-c:
			if !ok {
				t.Fatalf("stream ended before an event %q holding %q", name, want)
			}
			if ev.event == name && strings.Contains(ev.data, want) {
				return ev
			}
		case <-deadline:
			t.Fatalf("no event %q holding %q within 5 s", name, want)
		}
	}
}

// all waits until an event of each name holding its text has come, in any
// order, and returns them by name.
func all(t *testing.T, c <-chan sseEvent, want map[string]string) map[string]sseEvent {
	t.Helper()
	got := map[string]sseEvent{}
	deadline := time.After(5 * time.Second)
	for len(got) < len(want) {
		select {
		case ev, ok := <-c:
			if !ok {
				t.Fatalf("stream ended; got %d of %v", len(got), want)
			}
			name := ev.event
			if name == "job-timeline-wrap" {
				name = "timeline-append" // a full timeline (a resync) serves as well
			}
			if w, ok := want[name]; ok && strings.Contains(ev.data, w) {
				got[name] = ev
			}
		case <-deadline:
			t.Fatalf("within 5 s got only %d of the events %v", len(got), want)
		}
	}
	return got
}

func signedIn(t *testing.T, e *apiEnv, name string, role auth.Role) *browser {
	t.Helper()
	pw := e.user(name, role)
	b := e.browser(t)
	b.mustSignIn(name, pw)
	return b
}

func TestDashboardPagesShowActionsOnlyToOperators(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	id := e.job("q")
	viewer := signedIn(t, e, "vera", auth.RoleViewer)
	operator := signedIn(t, e, "otto", auth.RoleOperator)
	pages := []string{"/queues", "/jobs", "/jobs?queue=q&status=queued", "/jobs/" + id, "/locks", "/workers"}
	for _, p := range pages {
		for _, who := range []struct {
			name string
			b    *browser
			can  bool
		}{{"viewer", viewer, false}, {"operator", operator, true}} {
			r := who.b.get(p)
			if r.status != http.StatusOK {
				t.Errorf("%s GET %s: got %d, want 200", who.name, p, r.status)
				continue
			}
			body := string(r.body)
			hasActions := strings.Contains(body, `data-testid="job-cancel"`) || strings.Contains(body, `data-testid="row-cancel"`) ||
				strings.Contains(body, `data-testid="queue-pause"`)
			if p == "/locks" || p == "/workers" {
				continue // no actions there
			}
			if hasActions != who.can {
				t.Errorf("%s GET %s: action controls shown = %v, want %v", who.name, p, hasActions, who.can)
			}
			if !strings.Contains(body, `sse-connect="/live?`) {
				t.Errorf("%s GET %s: no live stream", who.name, p)
			}
		}
	}
	if r := viewer.get("/trigger"); r.status != http.StatusForbidden {
		t.Errorf("viewer GET /trigger: got %d, want 403", r.status)
	}
	if r := operator.get("/trigger"); r.status != http.StatusOK {
		t.Errorf("operator GET /trigger: got %d, want 200", r.status)
	}
	if r := operator.get("/jobs/" + uuid.NewString()); r.status != http.StatusNotFound {
		t.Errorf("GET an unknown job: got %d, want 404", r.status)
	}
	if r := operator.get("/jobs?status=bogus"); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "status") {
		t.Errorf("GET /jobs with a bad status: got %d, want 400 naming the field", r.status)
	}
}

func TestTriggerFormShowsFieldErrorsThenCreatesTheJob(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	op := signedIn(t, e, "otto", auth.RoleOperator)
	csrf := csrfOf(t, op.get("/trigger"))
	r := op.post("/trigger", url.Values{"_csrf": {csrf}, "queue": {"q"}, "task": {""}, "args": {"[1]"}, "max_attempts": {"0"}},
		"HX-Request", "true")
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("bad form: got %d, want 422", r.status)
	}
	for _, want := range []string{`data-testid="error-task"`, `data-testid="error-lock_key"`, `data-testid="error-args"`} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("bad form: answer lacks %s", want)
		}
	}
	r = op.post("/trigger", url.Values{"_csrf": {csrf}, "queue": {"q"}, "task": {"t"}, "lock_key": {"k"},
		"args": {`{"a": 1}`}, "priority": {"7"}, "max_attempts": {"3"}, "available_at": {"2030-01-02T03:04:05"}}, "HX-Request", "true")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `data-testid="trigger-result"`) {
		t.Fatalf("good form: got %d %s, want the result", r.status, r.body)
	}
	var id string
	e.pool.QueryRow(context.Background(), `SELECT job_id::text FROM dl_jobs WHERE queue = 'q' AND priority = 7 AND max_attempts = 3
		AND available_at = '2030-01-02T03:04:05Z' AND producer = 'user:otto'`).Scan(&id)
	if id == "" || !strings.Contains(string(r.body), id) {
		t.Errorf("the job was not stored as typed, or its link is missing (id %q)", id)
	}
}

func TestBulkCancelByFilterAsksThenCancelsOnlyMatchingJobs(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	op := signedIn(t, e, "otto", auth.RoleOperator)
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, e.job("a"))
	}
	other := e.job("b")
	csrf := csrfOf(t, op.get("/jobs?queue=a"))
	form := url.Values{"_csrf": {csrf}, "op": {"cancel-filter"}, "queue": {"a"}}
	r := op.post("/jobs/bulk", form, "HX-Request", "true")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "Cancel 5 queued or running jobs matching the filter") {
		t.Fatalf("ask: got %d %s", r.status, r.body)
	}
	if got := e.status(ids[0])["status"]; got != "queued" {
		t.Fatalf("asking changed the job: %v", got)
	}
	form.Set("confirm", "yes")
	r = op.post("/jobs/bulk", form, "HX-Request", "true")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "Canceled 5 jobs") {
		t.Fatalf("confirm: got %d %s", r.status, r.body)
	}
	for _, id := range ids {
		if got := e.status(id)["status"]; got != "canceled" {
			t.Errorf("job %s: got %v, want canceled", id, got)
		}
		if kinds := e.eventKinds(id); kinds[len(kinds)-1] != job.EventCanceled {
			t.Errorf("job %s: journal %v, want it to end with canceled", id, kinds)
		}
	}
	if got := e.status(other)["status"]; got != "queued" {
		t.Errorf("job outside the filter: got %v, want queued", got)
	}
	// Selected rows: only the applicable ones count.
	r = op.post("/jobs/bulk", url.Values{"_csrf": {csrf}, "op": {"retry-selected"}, "ids": {ids[0], other}}, "HX-Request", "true")
	if !strings.Contains(string(r.body), "Retry 1 selected job") {
		t.Errorf("retry selected: got %s, want 1 of the 2 (the queued one cannot be retried)", r.body)
	}
}

func TestLiveStreamRendersAChangeOncePerRoleForEveryViewer(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	id := e.job("q")
	viewers := []*browser{signedIn(t, e, "v1", auth.RoleViewer), signedIn(t, e, "v2", auth.RoleViewer)}
	op := signedIn(t, e, "otto", auth.RoleOperator)
	path := "/live?t=row:" + id + "&t=job:" + id
	var streams []<-chan sseEvent
	for _, b := range append(viewers, op) {
		s, _ := b.stream(path)
		streams = append(streams, s)
	}
	// Each stream first gets the page's full state (the topic is new).
	for _, s := range streams {
		next(t, s, "job-timeline-wrap", `data-kind="queued"`)
	}
	e.exec(`UPDATE dl_jobs SET status = 'running', attempt = 1, started_at = now(), heartbeat_at = now(),
		lease_expires_at = now() + interval '1 minute', progress = '{"done": 3, "total": 10, "unit": "rows"}' WHERE job_id = $1`, id)
	e.exec(`INSERT INTO dl_job_events (job_id, queue, kind, payload) VALUES ($1, 'q', 'picked', '{"attempt": 1}')`, id)
	rows := make([]sseEvent, len(streams))
	for i, s := range streams {
		got := all(t, s, map[string]string{"job-row-" + id: `data-status="running"`, "timeline-append": `data-kind="picked"`,
			"job-summary": "3 / 10 rows"})
		rows[i] = got["job-row-"+id]
	}
	if rows[0].data != rows[1].data || rows[0].id != rows[1].id {
		t.Errorf("two viewers got different messages for one change (ids %s, %s)", rows[0].id, rows[1].id)
	}
	if strings.Contains(rows[0].data, "row-cancel") || !strings.Contains(rows[2].data, "row-cancel") {
		t.Errorf("the viewer's row must have no cancel button and the operator's one")
	}
}

func TestLiveStreamReplaysWhatAReconnectingClientMissed(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	id := e.job("q")
	b := signedIn(t, e, "v1", auth.RoleViewer)
	path := "/live?t=row:" + id
	keep, _ := b.stream(path) // keeps the topic watched
	next(t, keep, "job-row-"+id, `data-status="queued"`)
	gone, closeGone := b.stream(path)
	first := next(t, gone, "job-row-"+id, `data-status="queued"`)
	closeGone()
	e.exec(`UPDATE dl_jobs SET priority = 5, attempt = 2 WHERE job_id = $1`, id)
	missed := next(t, keep, "job-row-"+id, ">2<")
	back, _ := b.stream(path, "Last-Event-ID", first.id)
	got := next(t, back, "job-row-"+id, ">2<")
	if got.id != missed.id {
		t.Errorf("replay: got message %s, want the missed one %s", got.id, missed.id)
	}
	// An id from another server epoch gets the current state instead.
	other, _ := b.stream(path, "Last-Event-ID", "0.1")
	next(t, other, "job-row-"+id, ">2<")
}

func TestLiveStreamSaysByeWhenTheServerStopsBeingReady(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	b := signedIn(t, e, "v1", auth.RoleViewer)
	s, _ := b.stream("/live?t=queues")
	next(t, s, "queues-table", "")
	e.srv.SetReady(false)
	next(t, s, "bye", "shutting down")
	select {
	case _, ok := <-s:
		if ok {
			t.Errorf("stream went on after bye")
		}
	case <-time.After(5 * time.Second):
		t.Errorf("stream did not end after bye")
	}
	if r := b.get("/live?t=queues"); r.status != http.StatusServiceUnavailable {
		t.Errorf("new stream while not ready: got %d, want 503", r.status)
	}
}

func TestLiveStreamRefusesUnknownTopics(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	b := signedIn(t, e, "v1", auth.RoleViewer)
	for _, p := range []string{"/live", "/live?t=nope", "/live?t=job:not-a-uuid", "/live?t=row:" + strings.ToUpper(uuid.NewString())} {
		if r := b.get(p); r.status != http.StatusBadRequest {
			t.Errorf("GET %s: got %d, want 400", p, r.status)
		}
	}
}

func TestWorkersPageShowsADrainingProcessWithItsCountdown(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.exec(`INSERT INTO dl_workers (worker_id, host, pid, queues, running, draining, drain_deadline)
		VALUES ('w-drain', 'h1', 42, '[{"queue":"q","concurrency":2}]', 1, true, now() + interval '15 seconds')`)
	r := signedIn(t, e, "vera", auth.RoleViewer).get("/workers")
	body := string(r.body)
	if r.status != http.StatusOK || !strings.Contains(body, `data-testid="worker-draining"`) ||
		!strings.Contains(body, `data-testid="worker-drain-deadline"`) || !strings.Contains(body, "data-countdown") {
		t.Errorf("GET /workers: got %d, want the draining badge and a countdown to its hand-back:\n%s", r.status, body)
	}
}

func TestQueuesPageListsSchedulesWithTheirTicks(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	id := e.job("nightly-q")
	e.exec(`INSERT INTO dl_schedules (name, cron, queue, task, lock_key, last_tick, last_job_id, next_tick)
		VALUES ('nightly', '0 3 * * *', 'nightly-q', 'etl.load', 'nightly', now() - interval '1 hour', $1, now() + interval '23 hours')`, id)
	r := signedIn(t, e, "vera", auth.RoleViewer).get("/queues")
	body := string(r.body)
	if r.status != http.StatusOK || !strings.Contains(body, `data-testid="schedule-row"`) || !strings.Contains(body, "0 3 * * *") ||
		!strings.Contains(body, "/jobs/"+id) {
		t.Errorf("GET /queues: got %d, want the schedule with its cron and a link to its last job", r.status)
	}
}
