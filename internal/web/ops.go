package web

import (
	"context"
	_ "embed"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/notify"
	"github.com/dataloader/dataloader/internal/store"
)

// health answers without touching the database: 200 while the process takes
// work, 503 once it is draining.
func (s *Server) health(c echo.Context) error {
	if !s.ready.Load() {
		c.Response().Header().Set("Retry-After", "5")
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "draining"})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

type statusBody struct {
	Status     string         `json:"status"` // ok | degraded
	Version    string         `json:"version"`
	Database   componentState `json:"database"`
	Migrations migrationState `json:"migrations"`
	Listener   *notify.State  `json:"listener,omitempty"`
	Workers    *workersState  `json:"workers,omitempty"`
}

type componentState struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

type migrationState struct {
	Current int64  `json:"current"`
	Target  int64  `json:"target"`
	Error   string `json:"error,omitempty"`
}

type workersState struct {
	WorkerID string `json:"worker_id"`
	Running  int    `json:"running"`
	Draining bool   `json:"draining"`
}

// status reports the parts the process depends on; 503 when any is down.
func (s *Server) status(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 3*time.Second)
	defer cancel()
	body := statusBody{Status: "ok", Version: s.Version, Database: componentState{OK: true}}
	if err := s.Store.Ping(ctx); err != nil {
		body.Database = componentState{Error: err.Error()}
	}
	cur, target, err := store.MigrationVersions(ctx, s.DSN)
	body.Migrations = migrationState{Current: cur, Target: target}
	if err != nil {
		body.Migrations.Error = err.Error()
	}
	if s.Listener != nil {
		st := s.Listener.State()
		body.Listener = &st
	}
	if s.Workers != nil {
		body.Workers = &workersState{WorkerID: s.Workers.WorkerID(), Running: s.Workers.Running(), Draining: s.Workers.Draining()}
	}
	code := http.StatusOK
	if !body.Database.OK || body.Migrations.Error != "" || cur != target || (body.Listener != nil && !body.Listener.Connected) {
		body.Status, code = "degraded", http.StatusServiceUnavailable
	}
	return c.JSON(code, body)
}

//go:embed openapi.json
var openAPIDoc []byte

func (s *Server) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/json", openAPIDoc)
}
