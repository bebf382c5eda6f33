package web_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestProbe(t *testing.T) {
	e := newAPIEnv(t)
	ok := `"task":"t","lock_key":"k"`
	bodies := []string{
		`{"queue":"a\u0000b",` + ok + `}`,
		`{"queue":"q","task":"t","lock_key":"k\u0000"}`,
		`{"queue":"q","task":"t\u0000","lock_key":"k"}`,
		`{"queue":"q",` + ok + `,"partition_key":"\u0000"}`,
		`{"queue":"q",` + ok + `,"idempotency_key":"\u0000"}`,
		`{"queue":"q",` + ok + `,"producer":"\u0000"}`,
		`{"queue":"q",` + ok + `,"args":{"a":"\u0000"}}`,
		`{"queue":"q",` + ok + `,"args":{"a":"\ud800"}}`,
		`{"queue":"q",` + ok + `,"args":{"a":1e400}}`,
		`{"queue":"q",` + ok + `,"args":{"a":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}}`,
		`{"queue":"q",` + ok + `,"available_at":"0001-01-01T00:00:00Z"}`,
		`{"queue":"q",` + ok + `,"available_at":"9999-12-31T23:59:59Z"}`,
		`{"queue":"q",` + ok + `,"available_at":"2026-01-02T15:04:05+23:59"}`,
		`{"queue":"q",` + ok + `,"producer":"` + strings.Repeat("p", 900000) + `"}`,
		"{\"queue\":\"\xff\xfe\"," + ok + `}`,
		`{"queue":"q",` + ok + `,"args":{"a":"\u0000"}, "idempotency_key":"x"}`,
	}
	for _, b := range bodies {
		r := e.do(http.MethodPost, "/api/v1/jobs/trigger", b)
		s := string(r.body)
		if len(s) > 200 { s = s[:200] }
		bb := b
		if len(bb) > 120 { bb = bb[:120] }
		t.Logf("%d %s <= %q", r.status, s, bb)
	}
	for _, p := range []string{"/api/v1/jobs?queue=%00", "/api/v1/jobs?task=%00", "/api/v1/jobs?lock_key=%ff", "/api/v1/jobs?queue=%ff"} {
		r := e.do(http.MethodGet, p, nil)
		t.Logf("%d %.200s <= %s", r.status, r.body, p)
	}
	for _, p := range []string{"/api/v1/queues/%00/pause", "/api/v1/queues/%ff/pause", "/api/v1/queues/a%2Fb/pause", "/api/v1/queues/a%20b/pause"} {
		r := e.do(http.MethodPost, p, nil)
		t.Logf("%d %.200s <= %s", r.status, r.body, p)
	}
	r := e.do(http.MethodGet, "/api/v1/queues", nil)
	t.Logf("%d %.400s", r.status, r.body)
	r = e.do(http.MethodHead, "/health", nil)
	t.Logf("HEAD health %d", r.status)
}
