package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dataloader/dataloader/internal/web"
)

func TestTriggerCreatesJobThenReturnsItForTheSameIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	body := map[string]any{"queue": "etl", "task": "import", "lock_key": "orders", "idempotency_key": "orders-1"}

	r := e.do(http.MethodPost, "/api/v1/jobs/trigger", body)
	if r.status != http.StatusCreated {
		t.Fatalf("%s: status got %d, want 201", r, r.status)
	}
	var first triggered
	r.decode(t, &first)
	if first.JobID == "" || first.Status != "queued" || !first.Created {
		t.Fatalf("first trigger: got %+v, want a job_id, status queued, created true", first)
	}

	body["args"] = map[string]any{"different": true} // the key decides, not the body
	r = e.do(http.MethodPost, "/api/v1/jobs/trigger", body)
	if r.status != http.StatusOK {
		t.Fatalf("%s: status got %d, want 200", r, r.status)
	}
	var second triggered
	r.decode(t, &second)
	if second != (triggered{JobID: first.JobID, Status: "queued", Created: false}) {
		t.Errorf("second trigger: got %+v, want the same job_id, status queued, created false", second)
	}

	// The existing job is returned with its current status.
	e.do(http.MethodPost, "/api/v1/jobs/"+first.JobID+"/cancel", nil)
	third := e.trigger(body)
	if third != (triggered{JobID: first.JobID, Status: "canceled", Created: false}) {
		t.Errorf("trigger after cancel: got %+v, want the same job_id, status canceled, created false", third)
	}
}

func TestTriggerWithoutIdempotencyKeyCreatesAJobEachTime(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	body := map[string]any{"queue": "etl", "task": "import", "lock_key": "orders"}
	a, b := e.trigger(body), e.trigger(body)
	if !a.Created || !b.Created || a.JobID == b.JobID {
		t.Errorf("got %+v and %+v, want two created jobs with different ids", a, b)
	}
}

func TestConcurrentTriggersWithOneIdempotencyKeyCreateOneJob(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	const n = 20
	body := map[string]any{"queue": "etl", "task": "import", "lock_key": "orders", "idempotency_key": "race"}
	results := make([]response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			raw, _ := json.Marshal(body)
			req, _ := http.NewRequest(http.MethodPost, e.ts.URL+"/api/v1/jobs/trigger", bytes.NewReader(raw))
			req.Header.Set("Content-Type", "application/json")
			e.authorize(req)
			res, err := e.ts.Client().Do(req)
			if err != nil {
				t.Errorf("trigger %d: %v", i, err)
				return
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			results[i] = response{method: "POST", path: "/api/v1/jobs/trigger", status: res.StatusCode, body: b}
		})
	}
	close(start)
	wg.Wait()

	var ids []string
	created := 0
	for _, r := range results {
		if r.status != http.StatusCreated && r.status != http.StatusOK {
			t.Errorf("%s: status got %d, want 201 or 200", r, r.status)
			continue
		}
		var tr triggered
		r.decode(t, &tr)
		if tr.Created != (r.status == http.StatusCreated) {
			t.Errorf("%s: created %v does not match the status", r, tr.Created)
		}
		if tr.Created {
			created++
		}
		ids = append(ids, tr.JobID)
	}
	if created != 1 {
		t.Errorf("responses with created true: got %d, want 1", created)
	}
	if slices.Sort(ids); len(slices.Compact(ids)) != 1 {
		t.Errorf("job ids: got %v, want one id in every response", ids)
	}
	var rows int
	if err := e.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM dl_jobs WHERE idempotency_key = 'race'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("rows in dl_jobs for the key: got %d, want 1", rows)
	}
}

func TestTriggerStoresEveryField(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	tr := e.trigger(map[string]any{
		"queue": "etl", "task": "import", "args": map[string]any{"date": "2026-01-02", "n": 3},
		"idempotency_key": "k-1", "lock_key": "orders", "partition_key": "eu", "priority": 7,
		"available_at": "2030-01-02T03:04:05.5+02:00", "max_attempts": 9, "lease_ttl_sec": 120, "producer": "billing",
	})
	r := e.do(http.MethodGet, "/api/v1/jobs/"+tr.JobID, nil)
	if r.status != http.StatusOK {
		t.Fatalf("%s: status got %d, want 200", r, r.status)
	}
	var j struct {
		JobID          string          `json:"job_id"`
		Queue          string          `json:"queue"`
		Task           string          `json:"task"`
		Args           json.RawMessage `json:"args"`
		IdempotencyKey string          `json:"idempotency_key"`
		LockKey        string          `json:"lock_key"`
		PartitionKey   string          `json:"partition_key"`
		Priority       int             `json:"priority"`
		AvailableAt    time.Time       `json:"available_at"`
		Status         string          `json:"status"`
		MaxAttempts    int             `json:"max_attempts"`
		LeaseTTLSec    int             `json:"lease_ttl_sec"`
		Producer       string          `json:"producer"`
	}
	r.decode(t, &j)
	wantAt := time.Date(2030, 1, 2, 1, 4, 5, 5e8, time.UTC)
	checks := []struct {
		field     string
		got, want any
	}{
		{"job_id", j.JobID, tr.JobID},
		{"queue", j.Queue, "etl"},
		{"task", j.Task, "import"},
		{"idempotency_key", j.IdempotencyKey, "k-1"},
		{"lock_key", j.LockKey, "orders"},
		{"partition_key", j.PartitionKey, "eu"},
		{"priority", j.Priority, 7},
		{"available_at", j.AvailableAt.UTC(), wantAt},
		{"status", j.Status, "queued"},
		{"max_attempts", j.MaxAttempts, 9},
		{"lease_ttl_sec", j.LeaseTTLSec, 120},
		{"producer", j.Producer, "billing"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.field, c.got, c.want)
		}
	}
	var args map[string]any
	if err := json.Unmarshal(j.Args, &args); err != nil || args["date"] != "2026-01-02" || args["n"] != 3.0 {
		t.Errorf("args: got %s, want {\"date\":\"2026-01-02\",\"n\":3}", j.Args)
	}
}

func TestTriggerAppliesDefaults(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	before := time.Now().Add(-time.Minute)
	id := e.job("etl")
	got := e.do(http.MethodGet, "/api/v1/jobs/"+id, nil).json(t)
	want := map[string]any{"args": map[string]any{}, "partition_key": "", "priority": 100.0, "max_attempts": 5.0,
		"lease_ttl_sec": 60.0, "attempt": 0.0, "cancel_requested": false, "progress": map[string]any{}}
	for k, w := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(w) {
			t.Errorf("%s: got %v, want %v", k, got[k], w)
		}
	}
	for _, k := range []string{"idempotency_key", "producer", "started_at", "finished_at", "error", "result"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s: got %v, want it absent", k, v)
		}
	}
	if at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(got["available_at"])); err != nil || at.Before(before) {
		t.Errorf("available_at: got %v, want about now", got["available_at"])
	}
}

// nulBug marks the cases of one handler bug, see the comment at its cases.
const nulBug = "U+0000 in a string is sent to PostgreSQL, which refuses it: 500 instead of 400"

func TestTriggerRejectsBadInputNamingTheField(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	long := func(n int) string { return strings.Repeat("x", n) }
	ok := `"queue":"q","task":"t","lock_key":"k"`
	cases := []struct {
		name, body, field string
		docCannotTell     bool   // the rule is not expressible in OpenAPI 3.0
		bug               string // a known handler bug: the case is skipped until it is fixed
	}{
		{name: "missing queue", body: `{"task":"t","lock_key":"k"}`, field: "queue"},
		{name: "empty queue", body: `{"queue":"","task":"t","lock_key":"k"}`, field: "queue"},
		{name: "null queue", body: `{"queue":null,"task":"t","lock_key":"k"}`, field: "queue"},
		{name: "queue over 128 bytes", body: `{"queue":"` + long(129) + `","task":"t","lock_key":"k"}`, field: "queue"},
		{name: "queue not a string", body: `{"queue":5,"task":"t","lock_key":"k"}`, field: "queue"},
		{name: "missing task", body: `{"queue":"q","lock_key":"k"}`, field: "task"},
		{name: "task over 128 bytes", body: `{"queue":"q","task":"` + long(129) + `","lock_key":"k"}`, field: "task"},
		{name: "missing lock_key", body: `{"queue":"q","task":"t"}`, field: "lock_key"},
		{name: "lock_key over 512 bytes", body: `{"queue":"q","task":"t","lock_key":"` + long(513) + `"}`, field: "lock_key"},
		{name: "partition_key over 512 bytes", body: `{` + ok + `,"partition_key":"` + long(513) + `"}`, field: "partition_key"},
		{name: "empty idempotency_key", body: `{` + ok + `,"idempotency_key":""}`, field: "idempotency_key"},
		{name: "idempotency_key over 512 bytes", body: `{` + ok + `,"idempotency_key":"` + long(513) + `"}`, field: "idempotency_key"},
		{name: "priority a string", body: `{` + ok + `,"priority":"x"}`, field: "priority"},
		{name: "priority a fraction", body: `{` + ok + `,"priority":1.5}`, field: "priority"},
		{name: "priority negative", body: `{` + ok + `,"priority":-1}`, field: "priority"},
		{name: "priority over the maximum", body: `{` + ok + `,"priority":1048577}`, field: "priority"},
		{name: "priority beyond int64", body: `{` + ok + `,"priority":1e30}`, field: "priority"},
		{name: "args an array", body: `{` + ok + `,"args":[1,2]}`, field: "args"},
		{name: "args a string", body: `{` + ok + `,"args":"a=1"}`, field: "args"},
		{name: "args null", body: `{` + ok + `,"args":null}`, field: "args"},
		{name: "available_at not RFC 3339", body: `{` + ok + `,"available_at":"tomorrow"}`, field: "available_at"},
		{name: "available_at without zone", body: `{` + ok + `,"available_at":"2026-01-02T15:04:05"}`, field: "available_at"},
		{name: "available_at a number", body: `{` + ok + `,"available_at":1767366245}`, field: "available_at"},
		{name: "max_attempts 0", body: `{` + ok + `,"max_attempts":0}`, field: "max_attempts"},
		{name: "max_attempts over 1000", body: `{` + ok + `,"max_attempts":1001}`, field: "max_attempts"},
		{name: "lease_ttl_sec 0", body: `{` + ok + `,"lease_ttl_sec":0}`, field: "lease_ttl_sec"},
		{name: "lease_ttl_sec over a day", body: `{` + ok + `,"lease_ttl_sec":86401}`, field: "lease_ttl_sec"},
		{name: "producer not a string", body: `{` + ok + `,"producer":7}`, field: "producer"},
		{name: "unknown field", body: `{` + ok + `,"colour":"red"}`, field: "colour"},
		{name: "malformed JSON", body: `{"queue" "q"}`, field: ""},
		{name: "truncated JSON", body: `{"queue":"q",`, field: ""},
		{name: "body an array", body: `[{"queue":"q"}]`, field: ""},
		{name: "body a string", body: `"queue"`, field: ""},
		{name: "body null", body: `null`, field: "queue"},
		{name: "two JSON objects", body: `{` + ok + `}{` + ok + `}`, field: "", docCannotTell: true},
		{name: "empty body", body: ``, field: ""},
		{name: "whitespace body", body: "  \n", field: ""},
		// Regression (fixed): a U+0000 in any string reaches PostgreSQL, which refuses it
		// (22021 in text columns, 22P05 in jsonb), and mapErr does not map
		// those codes: 500 instead of 400 naming the field.
		{name: "NUL in queue", body: `{"queue":"a\u0000b","task":"t","lock_key":"k"}`, field: "queue", docCannotTell: true, bug: nulBug},
		{name: "NUL in task", body: `{"queue":"q","task":"t\u0000","lock_key":"k"}`, field: "task", docCannotTell: true, bug: nulBug},
		{name: "NUL in lock_key", body: `{"queue":"q","task":"t","lock_key":"\u0000"}`, field: "lock_key", docCannotTell: true, bug: nulBug},
		{name: "NUL in partition_key", body: `{` + ok + `,"partition_key":"\u0000"}`, field: "partition_key", docCannotTell: true, bug: nulBug},
		{name: "NUL in idempotency_key", body: `{` + ok + `,"idempotency_key":"\u0000"}`, field: "idempotency_key", docCannotTell: true, bug: nulBug},
		{name: "NUL in producer", body: `{` + ok + `,"producer":"\u0000"}`, field: "producer", docCannotTell: true, bug: nulBug},
		{name: "NUL in args", body: `{` + ok + `,"args":{"a":"\u0000"}}`, field: "args", docCannotTell: true, bug: nulBug},
		// Regression (fixed): Go's decoder turns a lone surrogate into U+FFFD, so Validate
		// passes it, and PostgreSQL's jsonb refuses it (22P02): 400, but
		// without error.field.
		{name: "lone surrogate in args", body: `{` + ok + `,"args":{"a":"\ud800"}}`, field: "args", docCannotTell: true,
			bug: "lone surrogate in args: 400 without error.field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := e.with(t)
			r := e.do(http.MethodPost, "/api/v1/jobs/trigger", c.body)
			wantError(t, r, http.StatusBadRequest, "invalid", c.field)
			if !c.docCannotTell && e.docAccepts(http.MethodPost, "/api/v1/jobs/trigger", c.body) {
				t.Errorf("openapi.json accepts %s, want it to reject what the server rejects", c.body)
			}
		})
	}
}

func TestTriggerAcceptsBoundaryValues(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	long := func(n int) string { return strings.Repeat("é", n/2) } // two bytes each
	cases := map[string]map[string]any{
		"the largest values": {"queue": long(128), "task": long(128), "lock_key": long(512), "partition_key": long(512),
			"idempotency_key": long(512), "priority": 1048576, "max_attempts": 1000, "lease_ttl_sec": 86400},
		"the smallest values": {"queue": "q", "task": "t", "lock_key": "k", "idempotency_key": "i", "priority": 0,
			"max_attempts": 1, "lease_ttl_sec": 1},
		"nulls for optional fields": {"queue": "q", "task": "t", "lock_key": "k", "idempotency_key": nil, "priority": nil,
			"available_at": nil, "max_attempts": nil, "lease_ttl_sec": nil, "producer": nil},
		"an empty args object":     {"queue": "q", "task": "t", "lock_key": "k", "args": map[string]any{}},
		"available_at in the past": {"queue": "q", "task": "t", "lock_key": "k", "available_at": "2001-02-03T04:05:06Z"},
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := e.with(t)
			r := e.do(http.MethodPost, "/api/v1/jobs/trigger", body)
			if r.status != http.StatusCreated {
				t.Errorf("%s: status got %d, want 201", r, r.status)
			}
		})
	}
}

func TestTriggerBodyOverTheLimitIs413(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, func(d *web.Deps) { d.MaxBodyBytes = 1024 })
	body := map[string]any{"queue": "q", "task": "t", "lock_key": "k",
		"args": map[string]any{"blob": strings.Repeat("x", 2000)}}
	r := e.do(http.MethodPost, "/api/v1/jobs/trigger", body)
	wantError(t, r, http.StatusRequestEntityTooLarge, "too_large", "")

	r = e.do(http.MethodPost, "/api/v1/jobs/trigger", map[string]any{"queue": "q", "task": "t", "lock_key": "k"})
	if r.status != http.StatusCreated {
		t.Errorf("%s: a small body after a large one: status got %d, want 201", r, r.status)
	}
}

// --- status, get -------------------------------------------------------------
