package web

import (
	"github.com/labstack/echo/v4"
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
	api.POST("/jobs/trigger", s.triggerJob)
	api.GET("/jobs", s.listJobs)
	api.GET("/jobs/:job_id", s.getJob)
	api.GET("/jobs/:job_id/status", s.jobStatus)
	api.POST("/jobs/:job_id/cancel", s.cancelJob)
	api.POST("/jobs/:job_id/retry", s.retryJob)
	api.GET("/jobs/:job_id/events", s.jobEvents)
	api.GET("/jobs/:job_id/wait", s.waitJob)
	api.GET("/queues", s.listQueues)
	api.POST("/queues/:queue/pause", s.pauseQueue)
	api.POST("/queues/:queue/resume", s.resumeQueue)
}
