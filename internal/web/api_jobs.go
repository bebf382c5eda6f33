package web

import (
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/notify"
	"github.com/dataloader/dataloader/internal/store"
)

// triggerRequest is the body of POST /api/v1/jobs/trigger (the seed's field
// names, plus max_attempts, lease_ttl_sec and producer).
type triggerRequest struct {
	Queue          string          `json:"queue"`
	Task           string          `json:"task"`
	Args           json.RawMessage `json:"args"`
	IdempotencyKey *string         `json:"idempotency_key"`
	LockKey        string          `json:"lock_key"`
	PartitionKey   string          `json:"partition_key"`
	Priority       *int            `json:"priority"`
	AvailableAt    *string         `json:"available_at"`
	MaxAttempts    *int            `json:"max_attempts"`
	LeaseTTLSec    *int            `json:"lease_ttl_sec"`
	Producer       *string         `json:"producer"`
	CoalesceKey    *string         `json:"coalesce_key"`
}

// params turns the request into trigger parameters (not yet validated).
func (req triggerRequest) params() (job.TriggerParams, error) {
	p := job.TriggerParams{Queue: req.Queue, Task: req.Task, Args: req.Args, IdempotencyKey: req.IdempotencyKey,
		LockKey: req.LockKey, PartitionKey: req.PartitionKey, Priority: req.Priority, MaxAttempts: req.MaxAttempts,
		LeaseTTLSec: req.LeaseTTLSec, Producer: req.Producer, CoalesceKey: req.CoalesceKey}
	if req.AvailableAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *req.AvailableAt)
		if err != nil {
			return p, job.Invalid("available_at", "must be an RFC 3339 timestamp, e.g. 2026-01-02T15:04:05Z")
		}
		p.AvailableAt = &t
	}
	return p, nil
}

type triggerResponse struct {
	JobID   uuid.UUID  `json:"job_id"`
	Status  job.Status `json:"status"`
	Created bool       `json:"created"`
}

// statusResponse is the seed's status body.
type statusResponse struct {
	JobID       uuid.UUID       `json:"job_id"`
	Status      job.Status      `json:"status"`
	Attempt     int             `json:"attempt"`
	StartedAt   *time.Time      `json:"started_at,omitempty"`
	FinishedAt  *time.Time      `json:"finished_at,omitempty"`
	HeartbeatAt *time.Time      `json:"heartbeat_at,omitempty"`
	Error       *string         `json:"error,omitempty"`
	Progress    json.RawMessage `json:"progress"`
	Result      json.RawMessage `json:"result,omitempty"`
}

func statusOfJob(j job.Job) statusResponse {
	return statusResponse{JobID: j.ID, Status: j.Status, Attempt: j.Attempt, StartedAt: j.StartedAt,
		FinishedAt: j.FinishedAt, HeartbeatAt: j.HeartbeatAt, Error: j.Error, Progress: j.Progress, Result: j.Result}
}

func (s *Server) triggerJob(c echo.Context) error {
	if !s.ready.Load() {
		return job.Errorf(job.CodeUnavailable, "this replica is shutting down; retry on another")
	}
	var req triggerRequest
	if err := s.bindJSON(c, &req); err != nil {
		return err
	}
	p, err := req.params()
	if err != nil {
		return err
	}
	res, err := s.Store.Trigger(c.Request().Context(), p, s.DefaultLeaseTTL)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if res.Created {
		code = http.StatusCreated
	}
	return c.JSON(code, triggerResponse{JobID: res.JobID, Status: res.Status, Created: res.Created})
}

func (s *Server) jobStatus(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	j, err := s.Store.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, statusOfJob(j))
}

func (s *Server) getJob(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	j, err := s.Store.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, j)
}

func (s *Server) cancelJob(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	j, err := s.Store.Cancel(c.Request().Context(), id, actor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, statusOfJob(j))
}

type retryRequest struct {
	ExtraAttempts int `json:"extra_attempts"`
}

func (s *Server) retryJob(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	var req retryRequest
	if c.Request().ContentLength != 0 {
		if err := s.bindJSON(c, &req); err != nil {
			return err
		}
	}
	if req.ExtraAttempts < 0 || req.ExtraAttempts > job.MaxAttemptsCap {
		return job.Invalid("extra_attempts", "must be between 1 and %d (0 or absent: the job's max_attempts)", job.MaxAttemptsCap)
	}
	j, err := s.Store.Retry(c.Request().Context(), id, req.ExtraAttempts, actor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, statusOfJob(j))
}

type listResponse struct {
	Jobs       []job.Job `json:"jobs"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

func (s *Server) listJobs(c echo.Context) error {
	f := store.JobFilter{Queue: c.QueryParam("queue"), Task: c.QueryParam("task"), LockKey: c.QueryParam("lock_key"),
		Status: job.Status(c.QueryParam("status"))}
	if f.Status != "" && !f.Status.Valid() {
		return job.Invalid("status", "must be one of %s", joinStatuses())
	}
	limit, err := intQuery(c, "limit", 50, 1, 500)
	if err != nil {
		return err
	}
	f.Limit = limit
	if cur := c.QueryParam("cursor"); cur != "" {
		if f.Before, err = uuid.Parse(cur); err != nil {
			return job.Invalid("cursor", "must be the next_cursor of a previous page")
		}
	}
	page, err := s.Store.ListJobs(c.Request().Context(), f)
	if err != nil {
		return err
	}
	res := listResponse{Jobs: page.Jobs}
	if res.Jobs == nil {
		res.Jobs = []job.Job{} // an empty page is an empty array, not null
	}
	if page.Next != uuid.Nil {
		res.NextCursor = page.Next.String()
	}
	return c.JSON(http.StatusOK, res)
}

type eventsResponse struct {
	Events    []job.Event `json:"events"`
	NextAfter int64       `json:"next_after"`
}

func (s *Server) jobEvents(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	after, err := intQuery(c, "after", 0, 0, math.MaxInt64)
	if err != nil {
		return err
	}
	limit, err := intQuery(c, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, err := s.Store.Get(ctx, id); err != nil {
		return err
	}
	evs, err := s.Store.Events(ctx, id, int64(after), limit)
	if err != nil {
		return err
	}
	res := eventsResponse{Events: evs, NextAfter: int64(after)}
	if len(evs) > 0 {
		res.NextAfter = evs[len(evs)-1].ID
	}
	return c.JSON(http.StatusOK, res)
}

// maxWait bounds how long one wait request may hold a connection.
const maxWait = 300

// waitJob answers when the job reaches a final status or timeout_sec passes,
// whichever is first, with the status body. It is woken by the dl_job_done
// notification; a slow re-read covers a listener that is reconnecting.
func (s *Server) waitJob(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	timeout, err := intQuery(c, "timeout_sec", 30, 0, maxWait)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var sub *notify.Subscription
	if s.Listener != nil {
		sub = s.Listener.Subscribe(notify.ChannelDone, 64)
		defer sub.Close()
	}
	deadline := time.NewTimer(time.Duration(timeout) * time.Second)
	defer deadline.Stop()
	recheck := time.NewTicker(5 * time.Second)
	defer recheck.Stop()
	for {
		j, err := s.Store.Get(ctx, id)
		if err != nil {
			return err
		}
		if j.Status.Finished() {
			return c.JSON(http.StatusOK, statusOfJob(j))
		}
		if !s.waitFor(ctx, id, sub, deadline.C, recheck.C) {
			return c.JSON(http.StatusOK, statusOfJob(j))
		}
	}
}

// waitFor blocks until a notification may concern id (true), or the
// deadline or the client's departure (false).
func (s *Server) waitFor(ctx interface{ Done() <-chan struct{} }, id uuid.UUID, sub *notify.Subscription, deadline, recheck <-chan time.Time) bool {
	var notes <-chan notify.Notification
	if sub != nil {
		notes = sub.C
	}
	want := id.String()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline:
			return false
		case <-recheck:
			return true
		case n := <-notes:
			if n.Resync || sub.Missed() || slices.Contains(strings.Split(n.Payload, ","), want) {
				return true
			}
		}
	}
}

func joinStatuses() string {
	parts := make([]string, len(job.Statuses))
	for i, st := range job.Statuses {
		parts[i] = string(st)
	}
	return strings.Join(parts, ", ")
}
