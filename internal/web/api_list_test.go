package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/dataloader/dataloader/internal/notify"
	"github.com/dataloader/dataloader/internal/web"
)

type jobList struct {
	Jobs []struct {
		JobID string `json:"job_id"`
	} `json:"jobs"`
	NextCursor *string `json:"next_cursor"`
}

func (l jobList) ids() []string {
	var ids []string
	for _, j := range l.Jobs {
		ids = append(ids, j.JobID)
	}
	return ids
}

func TestListFiltersNarrowTheResult(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	mk := func(queue, task, lock string) string {
		return e.trigger(map[string]any{"queue": queue, "task": task, "lock_key": lock}).JobID
	}
	a := mk("q1", "t1", "k1")
	b := mk("q1", "t2", "k2")
	c := mk("q2", "t1", "k1")
	d := mk("q2", "t2", "k3")
	e.do(http.MethodPost, "/api/v1/jobs/"+d+"/cancel", nil)

	cases := []struct {
		query string
		want  []string // newest first
	}{
		{"", []string{d, c, b, a}},
		{"queue=q1", []string{b, a}},
		{"task=t1", []string{c, a}},
		{"lock_key=k1", []string{c, a}},
		{"status=canceled", []string{d}},
		{"status=queued", []string{c, b, a}},
		{"queue=q2&task=t2", []string{d}},
		{"queue=q1&status=canceled", nil},
		{"queue=nope", nil},
		{"lock_key=k3&status=canceled&queue=q2&task=t2", []string{d}},
	}
	for _, c := range cases {
		t.Run(c.query, func(t *testing.T) {
			t.Parallel()
			e := e.with(t)
			r := e.do(http.MethodGet, "/api/v1/jobs?"+c.query, nil)
			if r.status != http.StatusOK {
				t.Fatalf("%s: status got %d, want 200", r, r.status)
			}
			var l jobList
			r.decode(t, &l)
			if l.Jobs == nil {
				t.Errorf("jobs: got null, want an array")
			}
			if got := l.ids(); !slices.Equal(got, c.want) {
				t.Errorf("jobs: got %v, want %v", got, c.want)
			}
		})
	}
}

func TestListPaginationWalksEveryJobOnceNewestFirst(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	var want []string
	for range 7 {
		want = append([]string{e.job("etl")}, want...)
	}

	var got []string
	path := "/api/v1/jobs?limit=2"
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatalf("still paging after %d pages, want 4", pages)
		}
		r := e.do(http.MethodGet, path, nil)
		if r.status != http.StatusOK {
			t.Fatalf("%s: status got %d, want 200", r, r.status)
		}
		var l jobList
		r.decode(t, &l)
		if len(l.Jobs) > 2 {
			t.Fatalf("page of %d jobs, want at most 2", len(l.Jobs))
		}
		got = append(got, l.ids()...)
		if l.NextCursor == nil {
			break
		}
		if len(l.Jobs) < 2 {
			t.Errorf("a page of %d jobs carries next_cursor, want none on a short page", len(l.Jobs))
		}
		path = "/api/v1/jobs?limit=2&cursor=" + *l.NextCursor
	}
	if !slices.Equal(got, want) {
		t.Errorf("walked jobs:\n got %v\nwant %v", got, want)
	}
}

func TestListRejectsBadParametersNamingThem(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	cases := []struct{ query, field, bug string }{
		{query: "status=done", field: "status"},
		{query: "status=QUEUED", field: "status"},
		{query: "limit=0", field: "limit"},
		{query: "limit=501", field: "limit"},
		{query: "limit=-1", field: "limit"},
		{query: "limit=ten", field: "limit"},
		{query: "cursor=page2", field: "cursor"},
		{query: "cursor=123", field: "cursor"},
		// Regression (fixed): filter values go to PostgreSQL unchecked; a U+0000 or bytes
		// that are not UTF-8 make it fail with SQLSTATE 22021: 500.
		{query: "queue=%00", field: "queue", bug: "a NUL in a filter answers 500"},
		{query: "task=a%00", field: "task", bug: "a NUL in a filter answers 500"},
		{query: "lock_key=%ff", field: "lock_key", bug: "a filter that is not UTF-8 answers 500"},
		{query: "queue=%c3", field: "queue", bug: "a filter that is not UTF-8 answers 500"},
	}
	for _, c := range cases {
		t.Run(c.query, func(t *testing.T) {
			t.Parallel()
			e := e.with(t)
			r := e.do(http.MethodGet, "/api/v1/jobs?"+c.query, nil)
			wantError(t, r, http.StatusBadRequest, "invalid", c.field)
		})
	}
	for _, q := range []string{"limit=1", "limit=500", "status=lost"} {
		if r := e.do(http.MethodGet, "/api/v1/jobs?"+q, nil); r.status != http.StatusOK {
			t.Errorf("%s: status got %d, want 200", r, r.status)
		}
	}
}

// --- events ------------------------------------------------------------------

type eventList struct {
	Events []struct {
		EventID int64           `json:"event_id"`
		JobID   string          `json:"job_id"`
		Queue   string          `json:"queue"`
		Kind    string          `json:"kind"`
		TS      time.Time       `json:"ts"`
		Payload json.RawMessage `json:"payload"`
	} `json:"events"`
	NextAfter int64 `json:"next_after"`
}

func TestEventsPageThroughTheJournal(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	id := e.trigger(map[string]any{"queue": "etl", "task": "t", "lock_key": "k", "producer": "billing"}).JobID
	e.do(http.MethodPost, "/api/v1/jobs/"+id+"/cancel", nil)
	e.do(http.MethodPost, "/api/v1/jobs/"+id+"/retry", nil)

	var first eventList
	e.do(http.MethodGet, "/api/v1/jobs/"+id+"/events?limit=2", nil).decode(t, &first)
	if len(first.Events) != 2 || first.Events[0].Kind != "queued" || first.Events[1].Kind != "canceled" {
		t.Fatalf("first page: got %+v, want queued, canceled", first.Events)
	}
	ev := first.Events[0]
	if ev.JobID != id || ev.Queue != "etl" || ev.TS.IsZero() || !bytes.Contains(ev.Payload, []byte(`"billing"`)) {
		t.Errorf("queued event: got %+v, want job %s, queue etl, a ts and the producer in its payload", ev, id)
	}
	if first.NextAfter != first.Events[1].EventID {
		t.Errorf("next_after: got %d, want the last event_id %d", first.NextAfter, first.Events[1].EventID)
	}

	var second eventList
	e.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%s/events?after=%d", id, first.NextAfter), nil).decode(t, &second)
	if len(second.Events) != 1 || second.Events[0].Kind != "retried" {
		t.Fatalf("second page: got %+v, want retried", second.Events)
	}

	var third eventList
	e.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%s/events?after=%d", id, second.NextAfter), nil).decode(t, &third)
	if len(third.Events) != 0 || third.NextAfter != second.NextAfter || third.Events == nil {
		t.Errorf("past the end: got %+v, want an empty array and next_after %d", third, second.NextAfter)
	}
}

func TestEventsRejectBadParameters(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	id := e.job("etl")
	for _, c := range []struct{ query, field string }{
		{"after=-1", "after"}, {"after=x", "after"}, {"limit=0", "limit"}, {"limit=1001", "limit"}, {"limit=x", "limit"},
	} {
		t.Run(c.query, func(t *testing.T) {
			t.Parallel()
			e := e.with(t)
			r := e.do(http.MethodGet, "/api/v1/jobs/"+id+"/events?"+c.query, nil)
			wantError(t, r, http.StatusBadRequest, "invalid", c.field)
		})
	}
}

func TestEventsAcceptTheNextAfterTheyReturn(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	// event_id is a bigserial: a long-lived database passes 2^31.
	e.exec(`SELECT setval(pg_get_serial_sequence('dl_job_events', 'event_id'), 3000000000)`)
	id := e.job("etl")
	var l eventList
	e.do(http.MethodGet, "/api/v1/jobs/"+id+"/events", nil).decode(t, &l)
	if l.NextAfter <= 3000000000 {
		t.Fatalf("next_after: got %d, want past 3000000000", l.NextAfter)
	}
	// Regression (fixed): jobEvents bounds after to MaxInt32 (intQuery(c, "after", 0, 0,
	// int(^uint32(0)>>1))) although event_id is a bigserial, so once the
	// journal passes 2^31 events the next_after the API returns is refused
	// with 400 field after. Fix: bound after by math.MaxInt64 (and the
	// maximum of "after" in openapi.json with it).
	r := e.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%s/events?after=%d", id, l.NextAfter), nil)
	if r.status != http.StatusOK {
		t.Errorf("%s: status got %d, want 200", r, r.status)
	}
}

// --- wait --------------------------------------------------------------------

func TestWaitOnAQueuedJobAnswersItsStatusAtTheTimeout(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	id := e.job("etl")
	start := time.Now()
	r := e.do(http.MethodGet, "/api/v1/jobs/"+id+"/wait?timeout_sec=1", nil)
	if r.status != http.StatusOK || r.json(t)["status"] != "queued" {
		t.Fatalf("%s: got %d, want 200 with status queued", r, r.status)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Errorf("answered after %v, want after about the 1 s timeout", d)
	}
}

func TestWaitOnAFinishedJobAnswersAtOnce(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	for _, status := range []string{"canceled", "succeeded", "failed", "lost"} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			e := e.with(t)
			id := e.job("etl")
			e.setStatus(id, status)
			start := time.Now()
			r := e.do(http.MethodGet, "/api/v1/jobs/"+id+"/wait?timeout_sec=30", nil)
			if r.status != http.StatusOK || r.json(t)["status"] != status {
				t.Fatalf("%s: got %d, want 200 with status %s", r, r.status, status)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("answered after %v, want at once", d)
			}
		})
	}
}

func TestWaitIsWokenWhenTheJobEnds(t *testing.T) {
	t.Parallel()
	var l *notify.Listener
	e := newAPIEnv(t, func(d *web.Deps) {
		l = notify.New(d.DSN, discardLogger(), notify.ChannelJobs, notify.ChannelCancel, notify.ChannelDone)
		d.Listener = l
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(30 * time.Second); !l.State().Connected; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("listener did not connect")
		}
	}

	id := e.job("etl")
	go func() {
		time.Sleep(300 * time.Millisecond)
		if _, err := e.pool.Exec(context.Background(),
			`UPDATE dl_jobs SET status = 'canceled', finished_at = now() WHERE job_id = $1`, id); err != nil {
			t.Errorf("cancel: %v", err)
		}
		// What the store's cancel and the workers' finish announce.
		if _, err := e.pool.Exec(context.Background(), `SELECT pg_notify('dl_job_done', $1)`, id); err != nil {
			t.Errorf("notify: %v", err)
		}
	}()
	start := time.Now()
	r := e.do(http.MethodGet, "/api/v1/jobs/"+id+"/wait?timeout_sec=60", nil)
	if r.status != http.StatusOK || r.json(t)["status"] != "canceled" {
		t.Fatalf("%s: got %d, want 200 with status canceled", r, r.status)
	}
	// The handler also re-reads every 5 s; well before that, the
	// notification must have woken it.
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("answered after %v, want soon after the job ended", d)
	}
}

func TestWaitRejectsABadTimeout(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	id := e.job("etl")
	for _, q := range []string{"-1", "301", "x", "1.5"} {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			e := e.with(t)
			r := e.do(http.MethodGet, "/api/v1/jobs/"+id+"/wait?timeout_sec="+q, nil)
			wantError(t, r, http.StatusBadRequest, "invalid", "timeout_sec")
		})
	}
	r := e.do(http.MethodGet, "/api/v1/jobs/"+id+"/wait?timeout_sec=0", nil)
	if r.status != http.StatusOK || r.json(t)["status"] != "queued" {
		t.Errorf("%s: timeout_sec=0: got %d, want 200 with status queued at once", r, r.status)
	}
}

// --- queues ------------------------------------------------------------------
