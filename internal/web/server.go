// Package web is dataloader's HTTP boundary: the JSON API under /api/v1,
// the operations endpoints (/health, /status, /metrics) and, later, the
// dashboard. Handlers are thin: bind and validate, make one call, render.
package web

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/journal"
	"github.com/dataloader/dataloader/internal/metrics"
	"github.com/dataloader/dataloader/internal/notify"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/internal/worker"
)

// Deps are what the web layer needs from the rest of the process.
type Deps struct {
	Store           *store.Store
	Listener        *notify.Listener // may be nil in tests that do not wait
	Workers         *worker.Manager  // may be nil on an API-only replica
	Journal         *journal.Tailer  // follows the event journal for the export stream; may be nil
	Metrics         *metrics.Metrics
	Log             *slog.Logger
	DSN             string // for migration status
	Version         string
	MaxBodyBytes    int64
	DefaultLeaseTTL int        // seconds
	Auth            AuthConfig // sessions and cookies; the zero value suits tests
}

// Server is the HTTP application.
type Server struct {
	Deps
	e     *echo.Echo
	ready atomic.Bool
	auth  *authState
	// draining is closed when the process starts shutting down: streams
	// (imports, SSE) end cleanly instead of holding up the shutdown.
	draining  chan struct{}
	drainOnce sync.Once
}

// New builds the server with every route registered.
func New(d Deps) *Server {
	if d.MaxBodyBytes <= 0 {
		d.MaxBodyBytes = 1 << 20
	}
	if d.DefaultLeaseTTL <= 0 {
		d.DefaultLeaseTTL = 60
	}
	s := &Server{Deps: d, e: echo.New(), draining: make(chan struct{})}
	s.e.HideBanner, s.e.HidePort = true, true
	s.e.HTTPErrorHandler = s.handleError
	s.ready.Store(true)
	s.routes()
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.e.ServeHTTP(w, r) }

// SetReady flips readiness: a server that is not ready answers /health with
// 503 and refuses new jobs with 503 and Retry-After.
// Once not ready, streams are told to end.
func (s *Server) SetReady(ready bool) {
	s.ready.Store(ready)
	if !ready {
		s.drainOnce.Do(func() { close(s.draining) })
	}
}

// Draining is closed when the server stopped taking work; long-lived
// streams watch it to end cleanly.
func (s *Server) Draining() <-chan struct{} { return s.draining }

// Routes lists "METHOD path" of every registered route, for the OpenAPI test.
func (s *Server) Routes() []string {
	var out []string
	for _, r := range s.e.Routes() {
		if strings.HasPrefix(r.Method, "echo_") { // echo's group not-found catch-alls
			continue
		}
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

// requestLog logs one line per request at the boundary, with its request id.
func (s *Server) requestLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		req, res := c.Request(), c.Response()
		lvl := slog.LevelInfo
		if res.Status >= 500 {
			lvl = slog.LevelError
		} else if req.URL.Path == "/health" || req.URL.Path == "/metrics" {
			lvl = slog.LevelDebug
		}
		s.Log.Log(req.Context(), lvl, "http request", "method", req.Method, "path", req.URL.Path,
			"status", res.Status, "duration_ms", time.Since(start).Milliseconds(),
			"request_id", res.Header().Get(echo.HeaderXRequestID))
		return nil
	}
}

// Shutdown stops accepting requests and waits for those in flight.
func (s *Server) Shutdown(ctx context.Context) error { return s.e.Shutdown(ctx) }
