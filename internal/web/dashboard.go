package web

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/static"
	"github.com/dataloader/dataloader/views"
)

// dashboard holds the state of the operations dashboard: the counts cache,
// the throughput counter and the live hub. Its handlers are the dashboard's
// routes; every one of them is behind requireRole, except the static files.
type dashboard struct {
	s      *Server
	counts *countsCache
	tp     *throughput
	hub    *hub

	bg sync.WaitGroup // background throughput refreshes
}

// dashboardRoutes registers the dashboard pages, their htmx fragments and
// actions, the live SSE stream and the static assets.
func (s *Server) dashboardRoutes() {
	d := &dashboard{s: s, counts: newCountsCache(s.Store, s.Log), tp: newThroughput(s.Store)}
	d.hub = newHub(d)
	view, operate := s.requireRole(auth.RoleViewer), s.requireRole(auth.RoleOperator)

	s.e.GET("/static/*", echo.WrapHandler(staticHandler()))
	s.e.GET("/", d.home, view)
	s.e.GET("/queues", d.queuesPage, view)
	s.e.POST("/queues/:queue/pause", d.pause, operate)
	s.e.POST("/queues/:queue/resume", d.resume, operate)
	s.e.GET("/jobs", d.jobsPage, view)
	s.e.GET("/jobs/bulk", d.bulkDismiss, operate)
	s.e.POST("/jobs/bulk", d.bulk, operate)
	s.e.GET("/jobs/:job_id", d.jobPage, view)
	s.e.GET("/jobs/:job_id/events", d.jobEarlierEvents, view)
	s.e.POST("/jobs/:job_id/cancel", d.cancel, operate)
	s.e.POST("/jobs/:job_id/retry", d.retry, operate)
	s.e.GET("/locks", d.locksPage, view)
	s.e.GET("/workers", d.workersPage, view)
	s.e.GET("/trigger", d.triggerPage, operate)
	s.e.POST("/trigger", d.trigger, operate)
	s.e.GET("/live", d.live, view)
}

// staticHandler serves the embedded CSS, JS and vendored htmx. The files
// are not fingerprinted, so browsers revalidate after a short while.
func staticHandler() http.Handler {
	files := http.StripPrefix("/static/", http.FileServerFS(static.FS))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := fs.Stat(static.FS, r.URL.Path[len("/static/"):]); err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=300")
		files.ServeHTTP(w, r)
	})
}

func (d *dashboard) home(c echo.Context) error { return c.Redirect(http.StatusSeeOther, "/queues") }

// render writes an HTML answer.
func render(c echo.Context, status int, comp templ.Component) error {
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	h.Set("Cache-Control", "no-store")
	h.Add("Vary", "HX-Request")
	c.Response().WriteHeader(status)
	return comp.Render(c.Request().Context(), c.Response())
}

func isHTMX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

// fail answers a dashboard request that could not be served: an error page
// for a page load, or an alert shown in the flash area for an htmx request.
// Errors without a code (internal ones) go to echo's handler, which logs
// them.
func (d *dashboard) fail(c echo.Context, err error) error {
	var je *job.Error
	if !errors.As(err, &je) || je.Code == job.CodeInternal {
		return err
	}
	status := statusOf[je.Code]
	msg := je.Message
	if je.Field != "" {
		msg = je.Field + ": " + msg
	}
	if isHTMX(c) {
		h := c.Response().Header()
		h.Set("HX-Retarget", "#"+views.IDFlash)
		h.Set("HX-Reswap", "innerHTML")
		if status != http.StatusConflict {
			status = http.StatusUnprocessableEntity // an answer htmx swaps (see the layout's config)
		}
		return render(c, status, views.Alert("error", msg))
	}
	return render(c, status, views.ErrorPage(d.s.pageFor(c, "Error", ""), status, msg))
}

// canOperate reports whether the request's principal may act on jobs.
func canOperate(c echo.Context) bool { return principal(c).Can(auth.RoleOperator) }

// goBack redirects a plain (non-htmx) form post to the page it came from.
func goBack(c echo.Context, fallback string) error {
	if ref, err := url.Parse(c.Request().Referer()); err == nil && ref.Path != "" && localPath(ref.RequestURI()) {
		return c.Redirect(http.StatusSeeOther, ref.RequestURI())
	}
	return c.Redirect(http.StatusSeeOther, fallback)
}

// queuesView builds the overview from the counts snapshot and the
// throughput counter.
func (d *dashboard) queuesView(ctx context.Context, now time.Time) (views.QueuesView, error) {
	snap, err := d.counts.get(ctx, countsMaxAge)
	if err != nil {
		return views.QueuesView{}, err
	}
	d.refreshThroughput(now)
	v := views.QueuesView{Now: now}
	for _, q := range snap.queues() {
		row := views.QueueRow{Name: q, Paused: snap.Settings[q].Paused, PausedBy: snap.Settings[q].UpdatedBy,
			Counts: snap.statusCounts(q), Throughput: d.tp.series(q, now)}
		if t, ok := snap.Oldest[q]; ok && !t.After(now) {
			row.OldestReady = &t
		}
		for _, w := range snap.Workers {
			if now.Sub(w.HeartbeatAt) > workerStaleAfter {
				continue
			}
			for _, wq := range workerQueues(w) {
				if wq.Name == q {
					row.Workers++
					row.Slots += wq.Concurrency
				}
			}
		}
		v.Queues = append(v.Queues, row)
	}
	return v, nil
}

// refreshThroughput brings the per-minute counts up to date in the
// background when due (never on the request path).
func (d *dashboard) refreshThroughput(now time.Time) {
	d.tp.mu.Lock()
	due := !d.tp.busy && !now.Before(d.tp.next)
	d.tp.mu.Unlock()
	if !due {
		return
	}
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.tp.refresh(ctx, now); err != nil {
			d.s.Log.Warn("dashboard throughput refresh failed", "error", err)
		}
	}()
}

func (d *dashboard) queuesPage(c echo.Context) error {
	since := d.hub.cursor()
	v, err := d.queuesView(c.Request().Context(), time.Now())
	if err != nil {
		return d.fail(c, err)
	}
	p := d.s.pageFor(c, "Queues", "queues")
	if c.QueryParam("fragment") == views.IDQueues {
		return render(c, http.StatusOK, views.QueuesTable(v, p.User.CanOperate, p.CSRF))
	}
	p.Live = liveURL(since, topicQueues)
	scheds, err := d.s.Store.ListSchedules(c.Request().Context())
	if err != nil {
		return d.fail(c, err)
	}
	for _, sc := range scheds {
		row := views.ScheduleRow{Name: sc.Name, Cron: sc.Cron, Queue: sc.Queue, Task: sc.Task, LastTick: sc.LastTick, NextTick: sc.NextTick}
		if sc.LastJobID != nil {
			row.LastJobID = sc.LastJobID.String()
		}
		v.Schedules = append(v.Schedules, row)
	}
	return render(c, http.StatusOK, views.QueuesPage(p, v))
}

func (d *dashboard) pause(c echo.Context) error  { return d.setPaused(c, true) }
func (d *dashboard) resume(c echo.Context) error { return d.setPaused(c, false) }

func (d *dashboard) setPaused(c echo.Context, paused bool) error {
	q, err := url.PathUnescape(c.Param("queue"))
	if err != nil {
		return d.fail(c, job.Invalid("queue", "must be a percent-encoded queue name"))
	}
	ctx := c.Request().Context()
	if err := d.s.Store.SetQueuePaused(ctx, q, paused, actor(c)); err != nil {
		return d.fail(c, err)
	}
	d.counts.invalidate()
	d.hub.poke(topicQueues)
	if !isHTMX(c) {
		return goBack(c, "/queues")
	}
	// Answer with the overview as it is now: the cached snapshot may predate
	// the change, so overlay this queue's new state.
	v, err := d.queuesView(ctx, time.Now())
	if err != nil {
		return d.fail(c, err)
	}
	found := false
	for i := range v.Queues {
		if v.Queues[i].Name == q {
			v.Queues[i].Paused, v.Queues[i].PausedBy, found = paused, actor(c), true
		}
	}
	if !found {
		v.Queues = append(v.Queues, views.QueueRow{Name: q, Paused: paused, PausedBy: actor(c),
			Counts: countsZero(), Throughput: make([]int64, 60)})
	}
	return render(c, http.StatusOK, views.QueuesTable(v, true, csrfToken(c)))
}

func countsZero() []views.StatusCount {
	out := make([]views.StatusCount, len(job.Statuses))
	for i, st := range job.Statuses {
		out[i].Status = string(st)
	}
	return out
}

// workersView lists the worker processes of the counts snapshot.
func (d *dashboard) workersView(ctx context.Context, now time.Time) (views.WorkersView, error) {
	snap, err := d.counts.get(ctx, countsMaxAge)
	if err != nil {
		return views.WorkersView{}, err
	}
	v := views.WorkersView{Now: now}
	for _, w := range snap.Workers {
		wv := views.WorkerView{ID: w.WorkerID, Host: w.Host, PID: w.PID, Version: w.Version, Queues: workerQueues(w),
			Running: w.Running, Draining: w.Draining, DrainUntil: w.DrainUntil, StartedAt: w.StartedAt, SeenAt: w.HeartbeatAt,
			Stale: now.Sub(w.HeartbeatAt) > workerStaleAfter}
		for _, q := range wv.Queues {
			wv.Slots += q.Concurrency
		}
		v.Workers = append(v.Workers, wv)
	}
	return v, nil
}

func (d *dashboard) workersPage(c echo.Context) error {
	since := d.hub.cursor()
	v, err := d.workersView(c.Request().Context(), time.Now())
	if err != nil {
		return d.fail(c, err)
	}
	if c.QueryParam("fragment") == views.IDWorkers {
		return render(c, http.StatusOK, views.WorkersTable(v))
	}
	p := d.s.pageFor(c, "Workers", "workers")
	p.Live = liveURL(since, topicWorkers)
	return render(c, http.StatusOK, views.WorkersPage(p, v))
}

// Bounds of the locks page.
const (
	maxLocks       = 200
	waitersPerLock = 5
)

func (d *dashboard) locksView(ctx context.Context, now time.Time) (views.LocksView, error) {
	locks, err := d.s.Store.Locks(ctx, maxLocks, waitersPerLock)
	if err != nil {
		return views.LocksView{}, err
	}
	v := views.LocksView{Now: now}
	for _, l := range locks {
		lv := views.LockView{Key: l.Key, Waiting: l.Waiting}
		for _, h := range l.Holders {
			lj := views.LockJob{ID: h.JobID.String(), Queue: h.Queue, Task: h.Task, Since: h.StartedAt}
			if p, ok := parseProgress(h.Progress); ok {
				lj.Progress = &p
			}
			lv.Holders = append(lv.Holders, lj)
		}
		for _, w := range l.Waiters {
			ready := w.AvailableAt
			lv.Waiters = append(lv.Waiters, views.LockJob{ID: w.JobID.String(), Queue: w.Queue, Task: w.Task, Since: &ready})
		}
		v.Locks = append(v.Locks, lv)
	}
	return v, nil
}

func (d *dashboard) locksPage(c echo.Context) error {
	since := d.hub.cursor()
	v, err := d.locksView(c.Request().Context(), time.Now())
	if err != nil {
		return d.fail(c, err)
	}
	if c.QueryParam("fragment") == views.IDLocks {
		return render(c, http.StatusOK, views.LocksTable(v))
	}
	p := d.s.pageFor(c, "Locks", "locks")
	p.Live = liveURL(since, topicLocks)
	return render(c, http.StatusOK, views.LocksPage(p, v))
}
