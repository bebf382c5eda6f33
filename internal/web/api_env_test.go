package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/metrics"
	"github.com/dataloader/dataloader/internal/pgtest"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/internal/web"
)

// apiEnv is one server on its own fresh database.
type apiEnv struct {
	t    *testing.T
	dsn  string
	pool *pgxpool.Pool
	srv  *web.Server
	ts   *httptest.Server
	met  *metrics.Metrics
	st   *store.Store
	// token is an operator API token that do and authorize send.
	token string
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newAPIEnv serves the API over a fresh migrated database. opts adjust the
// dependencies before the server is built.
func newAPIEnv(t *testing.T, opts ...func(*web.Deps)) *apiEnv {
	t.Helper()
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	met := metrics.New()
	st := store.New(pool)
	d := web.Deps{Store: st, Metrics: met, Log: discardLogger(), DSN: dsn, Version: "test"}
	for _, o := range opts {
		o(&d)
	}
	_, token, err := st.CreateToken(ctx, "api-test", auth.RoleOperator, "test")
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	s := web.New(d)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return &apiEnv{t: t, dsn: dsn, pool: pool, srv: s, ts: ts, met: met, st: st, token: token}
}

// authorize makes req carry the environment's operator token.
func (e *apiEnv) authorize(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+e.token)
}

// with returns the environment reporting to t, for subtests: failures
// must go to the test whose goroutine finds them.
func (e *apiEnv) with(t *testing.T) *apiEnv {
	c := *e
	c.t = t
	return &c
}

// response is one HTTP answer, read in full.
type response struct {
	method, path string
	status       int
	header       http.Header
	body         []byte
}

func (r response) String() string {
	return fmt.Sprintf("%s %s → %d %s", r.method, r.path, r.status, r.body)
}

// json decodes the body as a JSON object.
func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("%s: body is not a JSON object: %v", r, err)
	}
	return m
}

// decode decodes the body into v.
func (r response) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("%s: decode into %T: %v", r, v, err)
	}
}

// do sends a request and reads the answer. body is nil (no body), a string
// or []byte (sent as is) or any other value (sent as its JSON). Every
// answer of a documented operation is checked against openapi.json, and a
// request the server accepted must be valid by the document too.
func (e *apiEnv) do(method, path string, body any) response {
	e.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			e.t.Fatalf("marshal body: %v", err)
		}
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, rd)
	if err != nil {
		e.t.Fatalf("request %s %s: %v", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	e.authorize(req)
	res, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	r := response{method: method, path: path, status: res.StatusCode, header: res.Header, body: b}
	if r.status >= 500 && r.status != http.StatusServiceUnavailable {
		e.t.Errorf("%s: got a %d, want no 5xx from a well-behaved request", r, r.status)
	}
	checkAgainstOpenAPI(e.t, req, raw, r)
	return r
}

var openAPI struct {
	once   sync.Once
	mu     sync.Mutex // the validators share the document's caches
	router routers.Router
	err    error
}

// docRoute finds the operation of req in openapi.json.
func docRoute(t testing.TB, req *http.Request) (*routers.Route, map[string]string, bool) {
	t.Helper()
	openAPI.once.Do(func() {
		doc, err := openapi3.NewLoader().LoadFromFile("openapi.json")
		if err == nil {
			err = doc.Validate(context.Background())
		}
		if err == nil {
			openAPI.router, err = legacy.NewRouter(doc)
		}
		openAPI.err = err
	})
	if openAPI.err != nil {
		t.Fatalf("openapi.json: %v", openAPI.err)
	}
	route, params, err := openAPI.router.FindRoute(req)
	return route, params, err == nil
}

// checkAgainstOpenAPI validates the response against the document, and the
// request too when the server accepted it.
func checkAgainstOpenAPI(t testing.TB, req *http.Request, body []byte, r response) {
	t.Helper()
	vreq := req.Clone(context.Background())
	vreq.Body = io.NopCloser(bytes.NewReader(body))
	route, params, ok := docRoute(t, vreq)
	if !ok {
		return // unknown routes and methods are tested on their own
	}
	openAPI.mu.Lock()
	defer openAPI.mu.Unlock()
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if r.status < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("%s: the server accepted a request that openapi.json rejects: %v", r, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: r.status, Header: r.header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	out.SetBodyBytes(r.body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s: response does not match openapi.json: %v", r, err)
	}
}

// docAccepts reports whether openapi.json accepts the request.
func (e *apiEnv) docAccepts(method, path string, body string) bool {
	e.t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	route, params, ok := docRoute(e.t, req)
	if !ok {
		e.t.Fatalf("%s %s is not in openapi.json", method, path)
	}
	openAPI.mu.Lock()
	defer openAPI.mu.Unlock()
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{SkipSettingDefaults: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	return openapi3filter.ValidateRequest(context.Background(), in) == nil
}

// wantError checks that r is the JSON error body with this status, code and field.
func wantError(t testing.TB, r response, status int, code, field string) {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: status got %d, want %d", r, r.status, status)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type got %q, want application/json", r, ct)
	}
	var body struct {
		Error struct {
			Code    string  `json:"code"`
			Message string  `json:"message"`
			Field   *string `json:"field"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Errorf("%s: body is not the JSON error body: %v", r, err)
		return
	}
	if body.Error.Code != code {
		t.Errorf("%s: error.code got %q, want %q", r, body.Error.Code, code)
	}
	if body.Error.Message == "" {
		t.Errorf("%s: error.message is empty, want an explanation", r)
	}
	got := ""
	if body.Error.Field != nil {
		got = *body.Error.Field
	}
	if got != field {
		t.Errorf("%s: error.field got %q, want %q", r, got, field)
	}
}

type triggered struct {
	JobID   string `json:"job_id"`
	Status  string `json:"status"`
	Created bool   `json:"created"`
}

// trigger enqueues a job and requires a 201 or 200.
func (e *apiEnv) trigger(body map[string]any) triggered {
	e.t.Helper()
	r := e.do(http.MethodPost, "/api/v1/jobs/trigger", body)
	if r.status != http.StatusCreated && r.status != http.StatusOK {
		e.t.Fatalf("%s: got %d, want 201 or 200", r, r.status)
	}
	var tr triggered
	r.decode(e.t, &tr)
	return tr
}

// job triggers a job in queue with defaults for the required fields.
func (e *apiEnv) job(queue string) string {
	e.t.Helper()
	return e.trigger(map[string]any{"queue": queue, "task": "noop", "lock_key": "k"}).JobID
}

// exec runs SQL on the test database (to put jobs in states the API cannot).
func (e *apiEnv) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.pool.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("exec %q: %v", sql, err)
	}
}

// setStatus moves a job to status as a worker would have, with one attempt
// made.
func (e *apiEnv) setStatus(id, status string) {
	e.t.Helper()
	switch status {
	case "running":
		e.exec(`UPDATE dl_jobs SET status = 'running', attempt = 1, started_at = now(), heartbeat_at = now(),
		        lease_expires_at = now() + interval '1 minute' WHERE job_id = $1`, id)
	case "queued":
	default:
		e.exec(`UPDATE dl_jobs SET status = $2::dl_status, attempt = 1, started_at = now(), finished_at = now()
		        WHERE job_id = $1`, id, status)
	}
}

// eventKinds lists the kinds of a job's events, oldest first.
func (e *apiEnv) eventKinds(id string) []string {
	e.t.Helper()
	r := e.do(http.MethodGet, "/api/v1/jobs/"+id+"/events", nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("%s: got %d, want 200", r, r.status)
	}
	var body struct {
		Events []struct {
			Kind string `json:"kind"`
		} `json:"events"`
	}
	r.decode(e.t, &body)
	var kinds []string
	for _, ev := range body.Events {
		kinds = append(kinds, ev.Kind)
	}
	return kinds
}

// status reads a job's status body.
func (e *apiEnv) status(id string) map[string]any {
	e.t.Helper()
	r := e.do(http.MethodGet, "/api/v1/jobs/"+id+"/status", nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("%s: got %d, want 200", r, r.status)
	}
	return r.json(e.t)
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// --- trigger -----------------------------------------------------------------
