package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/views"
)

// Bounds of the jobs list and of bulk actions.
const (
	jobsPageSize = 50
	// bulkCap is the most jobs one bulk action touches; "all matching the
	// filter" beyond it takes several confirmed rounds.
	bulkCap = 10_000
	// bulkMaxScan bounds how many rows a bulk action with a text filter
	// searches.
	bulkMaxScan = 200_000
)

func filterFromQuery(get func(string) string) views.JobsFilter {
	return views.JobsFilter{Queue: get("queue"), Status: get("status"), Task: get("task"),
		LockKey: get("lock_key"), Text: strings.TrimSpace(get("q"))}
}

func storeFilter(f views.JobsFilter) store.JobFilter {
	return store.JobFilter{Queue: f.Queue, Status: job.Status(f.Status), Task: f.Task, LockKey: f.LockKey, Text: f.Text}
}

func (d *dashboard) jobsPage(c echo.Context) error {
	since := d.hub.cursor()
	ctx, now := c.Request().Context(), time.Now()
	v := views.JobsView{Now: now, Filter: filterFromQuery(c.QueryParam), Cursor: c.QueryParam("before"), BulkCap: bulkCap}
	f := storeFilter(v.Filter)
	f.Limit = jobsPageSize
	status := http.StatusOK
	var err error
	if v.Cursor != "" {
		if f.Before, err = uuid.Parse(v.Cursor); err != nil {
			err = job.Invalid("before", "must be a job id (the cursor of the previous page)")
		}
	}
	var page store.JobPage
	if err == nil {
		page, err = d.s.Store.ListJobs(ctx, f)
	}
	if err != nil {
		if job.ErrorCode(err) != job.CodeInvalid {
			return err
		}
		v.Error, status = err.Error(), http.StatusBadRequest
	}
	topics := []string{topicCounts(v.Filter.Queue)}
	if v.Cursor == "" && v.Filter.Text == "" && v.Error == "" {
		topics = append(topics, topicHead(v.Filter))
	}
	for _, j := range page.Jobs {
		v.Rows = append(v.Rows, jobRowView(j))
		topics = append(topics, topicRow(j.ID))
	}
	if page.Next != uuid.Nil {
		v.Next = page.Next.String()
	}
	v.Scanned = page.Scanned
	snap, err := d.counts.get(ctx, countsMaxAge)
	if err != nil {
		return d.fail(c, err)
	}
	v.Queues = snap.queues()
	v.Counts = views.QueueCounts{Queue: v.Filter.Queue, Counts: snap.statusCounts(v.Filter.Queue)}

	p := d.s.pageFor(c, "Jobs", "jobs")
	switch c.QueryParam("fragment") {
	case views.IDJobsTable:
		return render(c, status, views.JobsTable(v, p.User.CanOperate, p.CSRF))
	case views.IDStatusCounts:
		return render(c, status, views.StatusCounts(v.Counts))
	}
	p.Live = liveURL(since, topics...)
	return render(c, status, views.JobsPage(p, v))
}

// jobDetail reads what the job page shows: the job, its newest events and,
// for a queued job, why it waits.
func (d *dashboard) jobDetail(c echo.Context, id uuid.UUID) (job.Job, []job.Event, views.JobView, error) {
	ctx, now := c.Request().Context(), time.Now()
	j, err := d.s.Store.Get(ctx, id)
	if err != nil {
		return j, nil, views.JobView{}, err
	}
	evs, err := d.s.Store.EventsTail(ctx, id, 0, timelineSize)
	if err != nil {
		return j, nil, views.JobView{}, err
	}
	var facts *store.WaitFacts
	if j.Status == job.StatusQueued {
		f, err := d.s.Store.WaitFacts(ctx, j, workerStaleAfter)
		if err != nil {
			return j, nil, views.JobView{}, err
		}
		facts = &f
	}
	return j, evs, jobView(now, j, evs, facts), nil
}

func (d *dashboard) jobPage(c echo.Context) error {
	since := d.hub.cursor()
	id, err := jobIDParam(c)
	if err != nil {
		return d.fail(c, err)
	}
	j, evs, jv, err := d.jobDetail(c, id)
	if err != nil {
		return d.fail(c, err)
	}
	p := d.s.pageFor(c, "Job "+shortJobID(id), "jobs")
	tl := timelineView(id, evs, timelineSize)
	switch c.QueryParam("fragment") {
	case views.IDJobSummary:
		return render(c, http.StatusOK, views.JobSummary(jv, p.User.CanOperate, p.CSRF))
	case views.IDTimelineWrap:
		return render(c, http.StatusOK, views.TimelineRegion(tl))
	}
	args := prettyJSON(j.Args)
	if args == "" {
		args = "{}"
	}
	p.Live = liveURL(since, topicJob(id))
	return render(c, http.StatusOK, views.JobPage(p, views.JobPageView{Job: jv, Args: args, Timeline: tl}))
}

func shortJobID(id uuid.UUID) string {
	s := id.String()
	return "…" + s[len(s)-12:]
}

// jobEarlierEvents answers "show earlier events" with the page of events
// before the given id (and a button for the ones before those).
func (d *dashboard) jobEarlierEvents(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return d.fail(c, err)
	}
	before, err := intQuery(c, "before", 0, 1, 1<<62)
	if err != nil {
		return d.fail(c, err)
	}
	evs, err := d.s.Store.EventsTail(c.Request().Context(), id, int64(before), timelineSize)
	if err != nil {
		return d.fail(c, err)
	}
	tl := timelineView(id, evs, timelineSize)
	return render(c, http.StatusOK, views.EarlierEvents(tl.JobID, tl.Events, tl.EarlierBefore))
}

func (d *dashboard) cancel(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return d.fail(c, err)
	}
	if _, err := d.s.Store.Cancel(c.Request().Context(), id, actor(c)); err != nil {
		return d.fail(c, err)
	}
	return d.jobChanged(c, id)
}

func (d *dashboard) retry(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return d.fail(c, err)
	}
	if _, err := d.s.Store.Retry(c.Request().Context(), id, 0, actor(c)); err != nil {
		return d.fail(c, err)
	}
	return d.jobChanged(c, id)
}

// jobChanged answers a job action with the region the request came from,
// rendered as the job is now, and tells the live hub not to wait.
func (d *dashboard) jobChanged(c echo.Context, id uuid.UUID) error {
	d.hub.poke(topicJob(id), topicRow(id))
	if !isHTMX(c) {
		return goBack(c, views.JobURL(id.String()))
	}
	j, _, jv, err := d.jobDetail(c, id)
	if err != nil {
		return d.fail(c, err)
	}
	if c.QueryParam("view") == "row" {
		return render(c, http.StatusOK, views.JobRowTR(time.Now(), jobRowView(j), canOperate(c), csrfToken(c)))
	}
	return render(c, http.StatusOK, views.JobSummary(jv, canOperate(c), csrfToken(c)))
}

// bulkDismiss empties the bulk panel.
func (d *dashboard) bulkDismiss(c echo.Context) error {
	return render(c, http.StatusOK, views.BulkPanel(views.BulkView{}, csrfToken(c)))
}

// bulk cancels or retries the selected jobs, or every job matching the
// filter (up to bulkCap): the first post asks for confirmation with the
// number of jobs concerned, the confirmed post acts on the jobs that match
// at that moment, in set-wise statements.
func (d *dashboard) bulk(c echo.Context) error {
	ctx := c.Request().Context()
	op, scope, _ := strings.Cut(c.FormValue("op"), "-")
	var applicable []job.Status
	switch op {
	case "cancel":
		applicable = []job.Status{job.StatusQueued, job.StatusRunning}
	case "retry":
		applicable = []job.Status{job.StatusFailed, job.StatusCanceled, job.StatusLost}
	default:
		return d.fail(c, job.Invalid("op", "must be cancel-selected, retry-selected, cancel-filter or retry-filter"))
	}
	v := views.BulkView{Op: op, Scope: scope, Cap: bulkCap, Filter: filterFromQuery(c.FormValue)}
	var target []uuid.UUID
	switch scope {
	case "selected":
		form, err := c.FormParams()
		if err != nil {
			return d.fail(c, job.Invalid("ids", "malformed form"))
		}
		raw := form["ids"]
		if len(raw) > bulkCap {
			return d.fail(c, job.Invalid("ids", "at most %d jobs at once", bulkCap))
		}
		ids := make([]uuid.UUID, 0, len(raw))
		for _, s := range raw {
			id, err := uuid.Parse(s)
			if err != nil {
				return d.fail(c, job.Invalid("ids", "must be job ids"))
			}
			ids = append(ids, id)
		}
		jobs, err := d.s.Store.JobsByIDs(ctx, ids)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if statusIn(j.Status, applicable) {
				target = append(target, j.ID)
			}
		}
		for _, id := range target {
			v.IDs = append(v.IDs, id.String())
		}
		if len(raw) == 0 {
			v.IDs = nil
		}
	case "filter":
		f := storeFilter(v.Filter)
		if f.Status != "" && !statusIn(f.Status, applicable) {
			break // nothing matching the filter can take the action
		}
		if f.Status == "" {
			f.StatusIn = applicable
		}
		ids, err := d.s.Store.MatchingJobIDs(ctx, f, bulkCap+1, bulkMaxScan)
		if err != nil {
			return d.fail(c, err)
		}
		if len(ids) > bulkCap {
			ids, v.Capped = ids[:bulkCap], true
		}
		target = ids
	default:
		return d.fail(c, job.Invalid("op", "must be cancel-selected, retry-selected, cancel-filter or retry-filter"))
	}
	v.N = len(target)
	if c.FormValue("confirm") == "yes" && len(target) > 0 {
		var res store.BulkResult
		var err error
		if op == "cancel" {
			res, err = d.s.Store.CancelMany(ctx, target, actor(c))
		} else {
			res, err = d.s.Store.RetryMany(ctx, target, actor(c))
		}
		if err != nil {
			return err
		}
		v.Done = &views.BulkDone{Requested: res.Requested, Changed: res.Changed, Skipped: res.Skipped}
		topics := make([]string, 0, len(target)+1)
		for _, id := range target {
			topics = append(topics, topicRow(id))
		}
		d.counts.invalidate()
		d.hub.poke(topics...)
	}
	if !isHTMX(c) {
		p := d.s.pageFor(c, "Bulk action", "jobs")
		return render(c, http.StatusOK, views.BulkPage(p, v))
	}
	return render(c, http.StatusOK, views.BulkPanel(v, csrfToken(c)))
}

func statusIn(s job.Status, set []job.Status) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}
