package web_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/dataloader/dataloader/internal/metrics"
	"github.com/dataloader/dataloader/internal/pgtest"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/internal/web"
)

// loadOpenAPI loads and validates internal/web/openapi.json.
func loadOpenAPI(t testing.TB) *openapi3.T {
	t.Helper()
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatalf("read openapi.json: %v", err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatalf("load openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI 3 document: %v", err)
	}
	return doc
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	if got, want := doc.OpenAPI, "3.0.3"; got != want {
		t.Errorf("openapi version: got %q, want %q", got, want)
	}
}

// operationsRoutes are the documented routes outside /api.
var operationsRoutes = map[string]bool{"/health": true, "/status": true, "/metrics": true}

// echoParam matches echo's ":param" path segments.
var echoParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

func TestOpenAPIDocumentsExactlyTheRoutes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	s := web.New(web.Deps{
		Store:   store.New(pgtest.Pool(t)),
		Metrics: metrics.New(),
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})

	routes := map[string]bool{}
	for _, r := range s.Routes() {
		method, path, ok := strings.Cut(r, " ")
		if !ok {
			t.Fatalf("route %q is not \"METHOD /path\"", r)
		}
		// Echo's internal routes (the catch-all not-found handlers a group
		// with middleware registers, method "echo_route_not_found") are not
		// part of the API.
		if strings.HasPrefix(method, "echo_") {
			continue
		}
		// The dashboard (pages, sign-in, static files) is not part of the
		// API either: the document covers /api and the operations routes.
		if !strings.HasPrefix(path, "/api/") && !operationsRoutes[path] {
			continue
		}
		routes[method+" "+echoParam.ReplaceAllString(path, "{$1}")] = true
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}

	var undocumented, stale []string
	for r := range routes {
		if !documented[r] {
			undocumented = append(undocumented, r)
		}
	}
	for d := range documented {
		if !routes[d] {
			stale = append(stale, d)
		}
	}
	slices.Sort(undocumented)
	slices.Sort(stale)
	if len(undocumented) > 0 {
		t.Errorf("routes missing from openapi.json:\n  %s", strings.Join(undocumented, "\n  "))
	}
	if len(stale) > 0 {
		t.Errorf("operations in openapi.json that no route serves:\n  %s", strings.Join(stale, "\n  "))
	}
	if len(routes) == 0 {
		t.Error("got no routes from Server.Routes, want the route table")
	}
}

func TestOpenAPIDocumentIsServed(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	r := e.do(http.MethodGet, "/api/v1/openapi.json", nil)
	if r.status != http.StatusOK {
		t.Fatalf("status: got %d, want 200", r.status)
	}
	if got := r.header.Get("Content-Type"); !strings.HasPrefix(got, "application/json") {
		t.Errorf("Content-Type: got %q, want application/json", got)
	}
	want, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.body, want) {
		t.Errorf("served document differs from openapi.json (got %d bytes, want %d)", len(r.body), len(want))
	}
	if _, err := openapi3.NewLoader().LoadFromData(r.body); err != nil {
		t.Errorf("served document does not load: %v", err)
	}
}
