package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataloader/dataloader/internal/web"
)

func TestStatusBodyHasTheSeedFields(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	id := e.job("etl")

	got := e.status(id)
	if keys, want := sortedKeys(got), []string{"attempt", "job_id", "progress", "status"}; !slices.Equal(keys, want) {
		t.Errorf("fields of a queued job: got %v, want %v", keys, want)
	}
	if got["job_id"] != id || got["status"] != "queued" || got["attempt"] != 0.0 {
		t.Errorf("queued job: got %v, want job_id %s, status queued, attempt 0", got, id)
	}
	if p, ok := got["progress"].(map[string]any); !ok || len(p) != 0 {
		t.Errorf("progress: got %v, want {}", got["progress"])
	}

	e.exec(`UPDATE dl_jobs SET status = 'failed', attempt = 2, started_at = now(), heartbeat_at = now(),
	        finished_at = now(), error = 'boom', progress = '{"done":3,"total":10}' WHERE job_id = $1`, id)
	got = e.status(id)
	want := []string{"attempt", "error", "finished_at", "heartbeat_at", "job_id", "progress", "started_at", "status"}
	if keys := sortedKeys(got); !slices.Equal(keys, want) {
		t.Errorf("fields of a failed job: got %v, want %v", keys, want)
	}
	if got["status"] != "failed" || got["attempt"] != 2.0 || got["error"] != "boom" {
		t.Errorf("failed job: got %v, want status failed, attempt 2, error boom", got)
	}
	if p, _ := got["progress"].(map[string]any); p["done"] != 3.0 || p["total"] != 10.0 {
		t.Errorf("progress: got %v, want done 3 of 10", got["progress"])
	}
	for _, k := range []string{"started_at", "finished_at", "heartbeat_at"} {
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(got[k])); err != nil {
			t.Errorf("%s: got %v, want an RFC 3339 time", k, got[k])
		}
	}

	// The product's one addition to the seed body: a recorded result.
	e.exec(`UPDATE dl_jobs SET status = 'succeeded', error = NULL, result = '{"rows":5}' WHERE job_id = $1`, id)
	got = e.status(id)
	if res, _ := got["result"].(map[string]any); res["rows"] != 5.0 {
		t.Errorf("result: got %v, want {\"rows\":5}", got["result"])
	}
	if _, ok := got["error"]; ok {
		t.Errorf("error: got %v, want it absent once cleared", got["error"])
	}
}

func TestJobRoutesRejectABadJobID(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	for _, route := range []struct{ method, suffix string }{
		{http.MethodGet, ""}, {http.MethodGet, "/status"}, {http.MethodGet, "/events"}, {http.MethodGet, "/wait"},
		{http.MethodPost, "/cancel"}, {http.MethodPost, "/retry"},
	} {
		for _, bad := range []string{"not-a-uuid", "123", "019b7f2e-8c1a-7d3e-9f00-2b6c1a4d5e6"} {
			t.Run(route.method+route.suffix+"/"+bad, func(t *testing.T) {
				t.Parallel()
				e := e.with(t)
				r := e.do(route.method, "/api/v1/jobs/"+bad+route.suffix, nil)
				wantError(t, r, http.StatusBadRequest, "invalid", "job_id")
			})
		}
	}
}

func TestJobRoutesAnswer404ForAnUnknownJob(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	unknown := "019b7f2e-8c1a-7d3e-9f00-2b6c1a4d5e6f"
	for _, route := range []struct {
		method, suffix string
		body           any
	}{
		{http.MethodGet, "", nil}, {http.MethodGet, "/status", nil}, {http.MethodGet, "/events", nil},
		{http.MethodGet, "/wait?timeout_sec=0", nil}, {http.MethodPost, "/cancel", nil}, {http.MethodPost, "/retry", nil},
		{http.MethodPost, "/retry", map[string]any{"extra_attempts": 2}},
	} {
		t.Run(route.method+route.suffix, func(t *testing.T) {
			t.Parallel()
			e := e.with(t)
			r := e.do(route.method, "/api/v1/jobs/"+unknown+route.suffix, route.body)
			wantError(t, r, http.StatusNotFound, "not_found", "")
		})
	}
}

// --- cancel ------------------------------------------------------------------

func TestCancelOfAQueuedJobCancelsItAtOnce(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	id := e.job("etl")

	r := e.do(http.MethodPost, "/api/v1/jobs/"+id+"/cancel", nil)
	if r.status != http.StatusOK {
		t.Fatalf("%s: status got %d, want 200", r, r.status)
	}
	if got := r.json(t); got["status"] != "canceled" || got["job_id"] != id {
		t.Errorf("cancel answer: got %v, want job %s with status canceled", got, id)
	}
	if got := e.status(id)["status"]; got != "canceled" {
		t.Errorf("status after cancel: got %v, want canceled", got)
	}
	if kinds := e.eventKinds(id); !slices.Equal(kinds, []string{"queued", "canceled"}) {
		t.Errorf("events: got %v, want [queued canceled]", kinds)
	}

	r = e.do(http.MethodPost, "/api/v1/jobs/"+id+"/cancel", nil)
	if r.status != http.StatusOK || r.json(t)["status"] != "canceled" {
		t.Errorf("%s: cancel again: got %d, want 200 with status canceled", r, r.status)
	}
	if kinds := e.eventKinds(id); len(kinds) != 2 {
		t.Errorf("events after a second cancel: got %v, want no new event", kinds)
	}
}

func TestCancelOfARunningJobRequestsCancellation(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	id := e.job("etl")
	e.setStatus(id, "running")

	r := e.do(http.MethodPost, "/api/v1/jobs/"+id+"/cancel", nil)
	if r.status != http.StatusOK || r.json(t)["status"] != "running" {
		t.Fatalf("%s: got %d, want 200 with status running (its worker stops it)", r, r.status)
	}
	if got := e.do(http.MethodGet, "/api/v1/jobs/"+id, nil).json(t)["cancel_requested"]; got != true {
		t.Errorf("cancel_requested: got %v, want true", got)
	}
	if kinds := e.eventKinds(id); !slices.Contains(kinds, "cancel_requested") {
		t.Errorf("events: got %v, want a cancel_requested event", kinds)
	}
}

func TestCancelOfAFinishedJobConflicts(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	for _, status := range []string{"succeeded", "failed", "lost"} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			e := e.with(t)
			id := e.job("etl")
			e.setStatus(id, status)
			r := e.do(http.MethodPost, "/api/v1/jobs/"+id+"/cancel", nil)
			wantError(t, r, http.StatusConflict, "conflict", "")
			if got := e.status(id)["status"]; got != status {
				t.Errorf("status after the refused cancel: got %v, want %s", got, status)
			}
		})
	}
}

// --- retry -------------------------------------------------------------------

func TestRetryOfAJobThatHasNotEndedConflicts(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	for _, status := range []string{"queued", "running", "succeeded"} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			e := e.with(t)
			id := e.job("etl")
			e.setStatus(id, status)
			r := e.do(http.MethodPost, "/api/v1/jobs/"+id+"/retry", nil)
			wantError(t, r, http.StatusConflict, "conflict", "")
		})
	}
}

func TestRetryOfAnEndedJobQueuesItAgain(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	cases := []struct {
		status          string
		body            any
		wantMaxAttempts float64 // attempt (1) + extra
	}{
		{"failed", nil, 1 + 5},
		{"canceled", nil, 1 + 5},
		{"lost", nil, 1 + 5},
		{"failed", map[string]any{}, 1 + 5},
		{"failed", map[string]any{"extra_attempts": 0}, 1 + 5},
		{"failed", map[string]any{"extra_attempts": 2}, 1 + 2},
		{"failed", map[string]any{"extra_attempts": 1000}, 1 + 1000},
	}
	for _, c := range cases {
		name, _ := json.Marshal(c.body)
		t.Run(c.status+"/"+string(name), func(t *testing.T) {
			t.Parallel()
			e := e.with(t)
			id := e.job("etl")
			e.setStatus(id, c.status)
			r := e.do(http.MethodPost, "/api/v1/jobs/"+id+"/retry", c.body)
			if r.status != http.StatusOK {
				t.Fatalf("%s: status got %d, want 200", r, r.status)
			}
			if got := r.json(t); got["status"] != "queued" || got["job_id"] != id {
				t.Errorf("retry answer: got %v, want job %s with status queued", got, id)
			}
			j := e.do(http.MethodGet, "/api/v1/jobs/"+id, nil).json(t)
			if j["max_attempts"] != c.wantMaxAttempts || j["cancel_requested"] != false {
				t.Errorf("job after retry: max_attempts %v, cancel_requested %v; want %v, false",
					j["max_attempts"], j["cancel_requested"], c.wantMaxAttempts)
			}
			if _, ok := j["finished_at"]; ok {
				t.Errorf("finished_at: got %v, want it cleared", j["finished_at"])
			}
			if kinds := e.eventKinds(id); !slices.Contains(kinds, "retried") {
				t.Errorf("events: got %v, want a retried event", kinds)
			}
		})
	}
}

func TestRetryRejectsBadExtraAttempts(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, func(d *web.Deps) { d.MaxBodyBytes = 1024 })
	id := e.job("etl")
	e.setStatus(id, "failed")
	cases := []struct {
		name, body   string
		status       int
		code, field  string
		docCanDecide bool
	}{
		{"negative", `{"extra_attempts":-1}`, 400, "invalid", "extra_attempts", true},
		{"over 1000", `{"extra_attempts":1001}`, 400, "invalid", "extra_attempts", true},
		{"a string", `{"extra_attempts":"3"}`, 400, "invalid", "extra_attempts", true},
		{"a fraction", `{"extra_attempts":1.5}`, 400, "invalid", "extra_attempts", true},
		{"unknown field", `{"attempts":3}`, 400, "invalid", "attempts", true},
		{"malformed JSON", `{"extra_attempts":`, 400, "invalid", "", true},
		{"not an object", `[3]`, 400, "invalid", "", true},
		{"over the body limit", `{"extra_attempts":1` + strings.Repeat(" ", 2000) + `}`, 413, "too_large", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := e.with(t)
			r := e.do(http.MethodPost, "/api/v1/jobs/"+id+"/retry", c.body)
			wantError(t, r, c.status, c.code, c.field)
			if c.docCanDecide && e.docAccepts(http.MethodPost, "/api/v1/jobs/"+id+"/retry", c.body) {
				t.Errorf("openapi.json accepts %s, want it to reject what the server rejects", c.body)
			}
		})
	}
	if got := e.status(id)["status"]; got != "failed" {
		t.Errorf("status after refused retries: got %v, want failed", got)
	}
}

// --- list --------------------------------------------------------------------
