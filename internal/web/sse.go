package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/views"
)

// live serves a page's server-sent event stream (see live.go): the topics
// are repeated "t" parameters; a reconnecting EventSource resumes from
// Last-Event-ID, a fresh page from its "since" cursor.
func (d *dashboard) live(c echo.Context) error {
	if !d.s.ready.Load() {
		c.Response().Header().Set("Retry-After", "5")
		return c.NoContent(http.StatusServiceUnavailable)
	}
	names := c.QueryParams()["t"]
	if len(names) == 0 || len(names) > maxStreamTopics {
		return job.Invalid("t", "between 1 and %d topics", maxStreamTopics)
	}
	seen := make(map[string]bool, len(names))
	uniq := names[:0:0]
	for _, n := range names {
		if _, _, _, ok := parseTopic(n); !ok {
			return job.Invalid("t", "unknown topic %q", n)
		}
		if !seen[n] {
			seen[n] = true
			uniq = append(uniq, n)
		}
	}
	cursor := c.Request().Header.Get("Last-Event-ID")
	if cursor == "" {
		cursor = c.QueryParam("since")
	}
	v := variantViewer
	if canOperate(c) {
		v = variantOperator
	}

	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // no proxy buffering
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(b []byte) error {
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second)) // a stuck client cannot pin the handler
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	// Reconnect after 2 s if the stream breaks (the browser's default is 3).
	if err := write([]byte("retry: 2000\n\n")); err != nil {
		return nil
	}

	sub := d.hub.subscribe(uniq, v, cursor)
	defer d.hub.unsubscribe(sub)
	ping := time.NewTicker(livePingInterval)
	defer ping.Stop()
	ctx := c.Request().Context()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.bye:
			_ = write([]byte("event: " + views.EventBye + "\ndata: server shutting down\n\n"))
			return nil
		case <-ping.C:
			if err := write([]byte(": ping\n\n")); err != nil {
				return nil
			}
			continue
		case <-sub.wake:
		}
		msgs, resync := sub.take()
		if len(resync) > 0 {
			d.hub.resync(sub, resync)
		}
		if len(msgs) == 0 {
			continue
		}
		var buf []byte
		for _, m := range msgs {
			buf = append(buf, m.wire...)
		}
		if err := write(buf); err != nil {
			return nil
		}
	}
}
