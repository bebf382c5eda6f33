package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/journal"
)

// streamKeepAlive is how often an idle stream sends a comment line, so
// proxies do not close it.
const streamKeepAlive = 15 * time.Second

// streamEvents is the export stream: server-sent events of the journal, each
// with its event_id as the SSE id, optionally filtered by queue or job. A
// client resumes with Last-Event-ID (or ?after=N) and receives every event
// after it, from the journal, then live, in order, without duplicates.
// Without either it starts at the journal's current end.
func (s *Server) streamEvents(c echo.Context) error {
	if s.Journal == nil {
		return job.Errorf(job.CodeUnavailable, "the event stream is not enabled on this replica")
	}
	f := journal.Filter{Queue: c.QueryParam("queue"), JobID: c.QueryParam("job_id")}
	if f.JobID != "" {
		if _, err := uuid.Parse(f.JobID); err != nil {
			return job.Invalid("job_id", "must be a UUID")
		}
	}
	cursor, err := streamCursor(c)
	if err != nil {
		return err
	}
	if cursor < 0 {
		cursor = s.Journal.Head()
	}
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set(echo.HeaderCacheControl, "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: 1000\n: stream from event %d\n\n", cursor)
	w.Flush()

	ctx, cancel := context.WithCancel(c.Request().Context())
	defer cancel()
	go func() {
		select {
		case <-s.draining:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		wait, stop := context.WithTimeout(ctx, streamKeepAlive)
		evs, next, err := s.Journal.Next(wait, cursor, f, 500)
		stop()
		switch {
		case ctx.Err() != nil:
			select {
			case <-s.draining:
				// Tell the client where it stands, then end: it reconnects
				// to another replica with Last-Event-ID.
				fmt.Fprintf(w, "event: end\ndata: {\"reason\":\"server shutting down\",\"last_event_id\":%d}\n\n", cursor)
				w.Flush()
			default:
			}
			return nil
		case err != nil && wait.Err() != nil:
			fmt.Fprint(w, ": keep-alive\n\n")
		case err != nil:
			s.Log.Warn("event stream read failed", "error", err)
			return nil
		}
		for _, ev := range evs {
			data, _ := json.Marshal(ev)
			fmt.Fprintf(w, "id: %d\nevent: job_event\ndata: %s\n\n", ev.ID, data)
		}
		cursor = next
		w.Flush()
	}
}

// streamCursor reads where to resume: Last-Event-ID, else ?after, else -1
// (start at the end).
func streamCursor(c echo.Context) (int64, error) {
	raw, field := c.Request().Header.Get("Last-Event-ID"), "Last-Event-ID"
	if raw == "" {
		raw, field = c.QueryParam("after"), "after"
	}
	if raw == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return 0, job.Invalid(field, "must be a non-negative event id")
	}
	return n, nil
}
