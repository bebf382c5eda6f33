package web

import (
	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/auth"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routes is the whole route table.
func (s *Server) routes() {
	s.e.Use(middleware.RequestID(), s.requestLog, middleware.Recover())

	s.e.GET("/health", s.health)
	s.e.GET("/status", s.status)
	s.e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.Metrics.Registry, promhttp.HandlerOpts{})))

	api := s.e.Group("/api/v1")
	api.GET("/openapi.json", s.openAPI)
	view, operate := s.requireRole(auth.RoleViewer), s.requireRole(auth.RoleOperator)
	api.GET("/jobs", s.listJobs, view)
	api.GET("/jobs/:job_id", s.getJob, view)
	api.GET("/jobs/:job_id/status", s.jobStatus, view)
	api.GET("/jobs/:job_id/events", s.jobEvents, view)
	api.GET("/jobs/:job_id/wait", s.waitJob, view)
	api.GET("/queues", s.listQueues, view)
	api.GET("/events/stream", s.streamEvents, view)
	api.POST("/jobs/trigger", s.triggerJob, operate)
	api.POST("/jobs/import", s.importJobs, operate)
	api.POST("/jobs/:job_id/cancel", s.cancelJob, operate)
	api.POST("/jobs/:job_id/retry", s.retryJob, operate)
	api.POST("/queues/:queue/pause", s.pauseQueue, operate)
	api.POST("/queues/:queue/resume", s.resumeQueue, operate)

	s.authRoutes()
	s.dashboardRoutes()
}
