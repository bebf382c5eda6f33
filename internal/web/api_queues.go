package web

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/job"
)

type queuesResponse struct {
	Queues []job.QueueStats `json:"queues"`
}

func (s *Server) listQueues(c echo.Context) error {
	qs, err := s.Store.Queues(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, queuesResponse{Queues: qs})
}

type pauseResponse struct {
	Queue  string `json:"queue"`
	Paused bool   `json:"paused"`
}

func (s *Server) pauseQueue(c echo.Context) error  { return s.setPaused(c, true) }
func (s *Server) resumeQueue(c echo.Context) error { return s.setPaused(c, false) }

func (s *Server) setPaused(c echo.Context, paused bool) error {
	// echo leaves escapes Go would not write itself (%2F, lower-case hex)
	// in the raw path parameter.
	q, err := url.PathUnescape(c.Param("queue"))
	if err != nil {
		return job.Invalid("queue", "must be a percent-encoded queue name")
	}
	if err := s.Store.SetQueuePaused(c.Request().Context(), q, paused, actor(c)); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pauseResponse{Queue: q, Paused: paused})
}
