package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/views"
)

// triggerView is the empty form with its suggestions.
func (d *dashboard) triggerView(ctx context.Context, vals views.TriggerValues) views.TriggerView {
	v := views.TriggerView{Values: vals, Errors: map[string]string{}}
	if snap, err := d.counts.get(ctx, 10*time.Second); err == nil {
		v.Queues = snap.queues()
	}
	// The worker manager lists its tasks once it has a Tasks method.
	if t, ok := any(d.s.Workers).(interface{ Tasks() []string }); ok && d.s.Workers != nil {
		v.Tasks = t.Tasks()
		sort.Strings(v.Tasks)
	}
	return v
}

func (d *dashboard) triggerPage(c echo.Context) error {
	v := d.triggerView(c.Request().Context(), views.TriggerValues{Args: "{}"})
	return render(c, http.StatusOK, views.TriggerPage(d.s.pageFor(c, "Trigger", "trigger"), v))
}

// trigger enqueues a job from the form. Problems are shown next to the
// field they concern (job.Error.Field), with status 422; success shows a
// link to the job (htmx) or goes to it (a plain form post).
func (d *dashboard) trigger(c echo.Context) error {
	ctx := c.Request().Context()
	vals := views.TriggerValues{Queue: strings.TrimSpace(c.FormValue("queue")), Task: strings.TrimSpace(c.FormValue("task")),
		LockKey: c.FormValue("lock_key"), Args: c.FormValue("args"), Priority: strings.TrimSpace(c.FormValue("priority")),
		IdempotencyKey: c.FormValue("idempotency_key"), AvailableAt: strings.TrimSpace(c.FormValue("available_at")),
		MaxAttempts: strings.TrimSpace(c.FormValue("max_attempts"))}
	v := d.triggerView(ctx, vals)
	p, errs := triggerParams(vals)
	if len(errs) == 0 {
		by := actor(c)
		p.Producer = &by
		if !d.s.ready.Load() {
			v.General = "This server is shutting down; trigger the job on another replica."
		} else if res, err := d.s.Store.Trigger(ctx, p, d.s.DefaultLeaseTTL); err != nil {
			var je *job.Error
			if !errors.As(err, &je) || je.Code == job.CodeInternal {
				return err
			}
			if je.Field != "" {
				errs[je.Field] = je.Message
			} else {
				v.General = je.Message
			}
		} else {
			d.counts.invalidate()
			if !isHTMX(c) {
				return c.Redirect(http.StatusSeeOther, views.JobURL(res.JobID.String()))
			}
			v.Created = &views.TriggerResult{ID: res.JobID.String(), Status: string(res.Status), Existing: !res.Created}
		}
	}
	status := http.StatusOK
	if len(errs) > 0 || v.General != "" {
		v.Errors, status = errs, http.StatusUnprocessableEntity
	}
	if !isHTMX(c) {
		return render(c, status, views.TriggerPage(d.s.pageFor(c, "Trigger", "trigger"), v))
	}
	return render(c, status, views.TriggerForm(v, csrfToken(c)))
}

// triggerParams parses the form's fields; errs maps each bad field to its
// problem (the rest is validated by job.TriggerParams.Validate in Trigger).
func triggerParams(v views.TriggerValues) (job.TriggerParams, map[string]string) {
	errs := map[string]string{}
	p := job.TriggerParams{Queue: v.Queue, Task: v.Task, LockKey: v.LockKey}
	for _, f := range []struct{ name, value string }{{"queue", v.Queue}, {"task", v.Task}, {"lock_key", v.LockKey}} {
		if f.value == "" {
			errs[f.name] = "is required"
		}
	}
	if args := strings.TrimSpace(v.Args); args != "" {
		if !json.Valid([]byte(args)) {
			errs["args"] = "must be valid JSON, e.g. {\"chunks\": 10}"
		} else if !strings.HasPrefix(args, "{") {
			errs["args"] = "must be a JSON object"
		}
		p.Args = json.RawMessage(args)
	}
	if v.IdempotencyKey != "" {
		k := v.IdempotencyKey
		p.IdempotencyKey = &k
	}
	intField := func(name, raw string, dst **int) {
		if raw == "" {
			return
		}
		n, err := strconv.Atoi(raw)
		if err != nil {
			errs[name] = "must be a whole number"
			return
		}
		*dst = &n
	}
	intField("priority", v.Priority, &p.Priority)
	intField("max_attempts", v.MaxAttempts, &p.MaxAttempts)
	if v.AvailableAt != "" {
		t, err := parseFormTime(v.AvailableAt)
		if err != nil {
			errs["available_at"] = "must be a date and time, e.g. 2026-01-02T15:04:05 (UTC) or RFC 3339 with an offset"
		} else {
			p.AvailableAt = &t
		}
	}
	if len(errs) == 0 {
		if err := p.Validate(); err != nil {
			var je *job.Error
			if errors.As(err, &je) && je.Field != "" {
				errs[je.Field] = je.Message
			}
		}
	}
	return p, errs
}

// parseFormTime reads a datetime-local value (taken as UTC) or RFC 3339.
func parseFormTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("unrecognized time")
}
