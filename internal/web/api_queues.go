package web

import (
	"net/http"

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
	q := c.Param("queue")
	if err := s.Store.SetQueuePaused(c.Request().Context(), q, paused, actor(c)); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pauseResponse{Queue: q, Paused: paused})
}
