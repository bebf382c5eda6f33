package web

import (
	"bytes"
	"cmp"
	"context"
	"net/url"
	"slices"
	"time"

	"github.com/a-h/templ"
	"github.com/google/uuid"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/views"
)

// tickState is the loop's memory between ticks.
type tickState struct {
	next                     time.Time // next periodic tick
	aggAt, workersAt, rowsAt time.Time
	errAt                    time.Time // last logged error (at most one per 10 s)
	factsBudget              int       // wait explanations left to read this tick
}

// waitFactsPerTick bounds the wait-explanation queries of one tick (each
// watched queued job page needs one every waitFactsEvery).
const waitFactsPerTick = 20

// work is one topic to serve this tick, read under the hub's lock.
type work struct {
	t        *topic
	variants [nVariants]bool
	full     bool       // send everything to every subscriber
	fullFor  []*liveSub // send a full timeline to these
	poked    bool
}

// outMsg is a rendered message waiting to be published.
type outMsg struct {
	t       *topic
	event   string
	variant variant
	data    []byte
	keep    bool
	only    []*liveSub // nil: publish to the topic
}

// tick serves the watched topics that are due: read, render what changed,
// publish. A periodic tick reads every job page (and every second every
// list row); a tick between them, woken by a notification or an action,
// reads only the jobs it names.
func (h *hub) tick(ctx context.Context, st *tickState, periodic bool) {
	now := time.Now()
	rowsDue := periodic && now.Sub(st.rowsAt) >= rowsEvery
	if rowsDue {
		st.rowsAt = now
	}
	st.factsBudget = waitFactsPerTick
	var jobs, aggs []work
	h.mu.Lock()
	done := h.done
	h.done = map[uuid.UUID]bool{}
	for name, t := range h.topics {
		if len(t.subs) == 0 {
			if !t.idleSince.IsZero() && now.Sub(t.idleSince) > topicLinger {
				delete(h.topics, name)
			}
			continue
		}
		w := work{t: t, full: t.needsFull, poked: h.poked[name]}
		t.needsFull = false
		for s := range t.subs {
			w.variants[s.variant] = true
		}
		for s := range t.fullFor {
			w.fullFor = append(w.fullFor, s)
		}
		t.fullFor = nil
		named := w.full || w.poked || len(w.fullFor) > 0 || done[t.jobID]
		switch t.kind {
		case kindJob:
			if periodic || named {
				jobs = append(jobs, w)
			}
		case kindRow:
			if rowsDue || named {
				jobs = append(jobs, w)
			}
		default:
			aggs = append(aggs, w)
		}
	}
	clear(h.poked)
	h.mu.Unlock()

	// Job pages and rows first, published at once: a slow aggregate below
	// must not hold back a job's final state. Every read is bounded.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if len(jobs) > 0 {
		msgs, err := h.serveJobs(ctx, now, st, jobs)
		if err != nil {
			h.logErr(st, now, "live job update failed", err)
		}
		h.flush(msgs, jobs, err != nil)
	}
	aggDue := now.Sub(st.aggAt) >= aggregateEvery
	workersDue := now.Sub(st.workersAt) >= workersEvery
	var out []outMsg
	var failed []work
	for _, w := range aggs {
		due := aggDue || w.full || w.poked || len(w.fullFor) > 0
		if w.t.kind == kindWorkers {
			due = workersDue || w.full || w.poked
		}
		if !due {
			continue
		}
		msgs, err := h.serveAggregate(ctx, now, w)
		if err != nil {
			h.logErr(st, now, "live update failed", err, "topic", w.t.name)
			failed = append(failed, w)
			continue
		}
		out = append(out, msgs...)
	}
	if aggDue {
		st.aggAt = now
	}
	if workersDue {
		st.workersAt = now
	}
	h.flush(out, failed, true)
}

// flush publishes rendered messages; the topics of failed work that was to
// send everything try again next tick.
func (h *hub) flush(out []outMsg, failed []work, retry bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range out {
		if m.only != nil {
			for _, sub := range m.only {
				h.sendLocked(sub, m.t, m.event, m.variant, m.data)
			}
			continue
		}
		h.publishLocked(m.t, m.event, m.variant, m.data, m.keep)
	}
	if !retry {
		return
	}
	for _, w := range failed {
		if w.full {
			w.t.needsFull = true
		}
	}
}

func (h *hub) logErr(st *tickState, now time.Time, msg string, err error, args ...any) {
	if now.Sub(st.errAt) < 10*time.Second || err == nil {
		return
	}
	st.errAt = now
	h.d.s.Log.Warn(msg, append(args, "error", err)...)
}

// serveJobs reads the watched jobs (one statement) and the new events of
// the watched job pages (one statement, plus one per page just opened),
// then renders the rows and summaries that changed and the new events.
func (h *hub) serveJobs(ctx context.Context, now time.Time, st *tickState, ws []work) ([]outMsg, error) {
	// Rows read what a row shows and its version; job pages read the
	// whole job. Each is one statement for all of them.
	var rowIDs, pageIDs []uuid.UUID
	for _, w := range ws {
		if len(rowIDs)+len(pageIDs) >= maxWatchedJobs {
			break
		}
		if w.t.kind == kindRow {
			rowIDs = append(rowIDs, w.t.jobID)
		} else {
			pageIDs = append(pageIDs, w.t.jobID)
		}
	}
	rowsByID := make(map[uuid.UUID]store.JobRow, len(rowIDs))
	if len(rowIDs) > 0 {
		rows, err := h.d.s.Store.JobRowsByIDs(ctx, rowIDs)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			rowsByID[r.Job.ID] = r
		}
	}
	byID := make(map[uuid.UUID]job.Job, len(pageIDs))
	if len(pageIDs) > 0 {
		jobs, err := h.d.s.Store.JobsByIDs(ctx, pageIDs)
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			byID[j.ID] = j
		}
	}

	// New journal events of job pages; pages just opened read their tail.
	var evIDs []uuid.UUID
	var evAfter []int64
	newEvents := map[uuid.UUID][]job.Event{}
	for i := range ws {
		w := &ws[i]
		if w.t.kind != kindJob {
			continue
		}
		if w.full || !w.t.seeded {
			tail, err := h.d.s.Store.EventsTail(ctx, w.t.jobID, 0, timelineSize)
			if err != nil {
				return nil, err
			}
			w.t.recent, w.t.seeded, w.full = tail, true, true
			continue
		}
		evIDs = append(evIDs, w.t.jobID)
		evAfter = append(evAfter, rereadFrom(w.t, now))
	}
	if len(evIDs) > 0 {
		evs, err := h.d.s.Store.EventsAfterMany(ctx, evIDs, evAfter, 2*timelineSize+1)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			newEvents[e.JobID] = append(newEvents[e.JobID], e)
		}
	}

	var out []outMsg
	for i := range ws {
		w := &ws[i]
		if w.t.kind == kindRow {
			r, ok := rowsByID[w.t.jobID]
			if !ok {
				continue // deleted (retention), or beyond maxWatchedJobs
			}
			// The row version is the fingerprint: an unchanged row costs
			// nothing more.
			msgs, err := h.renderVariants(ctx, w, views.JobRowID(r.Job.ID.String()), uint64(r.Version), func(v variant) templ.Component {
				return views.JobRowTR(now, jobRowView(r.Job), v == variantOperator, "")
			})
			if err != nil {
				return nil, err
			}
			out = append(out, msgs...)
			continue
		}
		j, ok := byID[w.t.jobID]
		if !ok {
			continue
		}
		msgs, err := h.serveJobPage(ctx, now, st, w, j, newEvents[j.ID])
		if err != nil {
			return nil, err
		}
		out = append(out, msgs...)
	}
	return out, nil
}

// eventSettle is how long the hub keeps re-reading a job page's newest
// events. Most events are written with a job's row update (whose lock
// orders their commits), but a handler's own events (Run.Event) are plain
// inserts that may commit after an event with a higher id was read.
const eventSettle = 5 * time.Second

// rereadFrom is the event id after which a job page's events are read:
// the newest event older than eventSettle (events after it are read again
// and deduplicated).
func rereadFrom(t *topic, now time.Time) int64 {
	for i := len(t.recent) - 1; i >= 0; i-- {
		if now.Sub(t.recent[i].TS) > eventSettle {
			return t.recent[i].ID
		}
	}
	if len(t.recent) == timelineSize {
		return t.recent[0].ID // all recent: do not reach further back
	}
	return 0
}

// serveJobPage renders a job page's summary when it changed, its new
// events, and full timelines where needed.
func (h *hub) serveJobPage(ctx context.Context, now time.Time, st *tickState, w *work, j job.Job, evs []job.Event) ([]outMsg, error) {
	t := w.t
	seen := make(map[int64]bool, len(t.recent))
	for _, e := range t.recent {
		seen[e.ID] = true
	}
	fresh := evs[:0:0]
	for _, e := range evs {
		if !seen[e.ID] {
			fresh = append(fresh, e)
		}
	}
	evs = fresh
	if len(evs) > timelineSize { // too many to append: start over from the tail
		tail, err := h.d.s.Store.EventsTail(ctx, t.jobID, 0, timelineSize)
		if err != nil {
			return nil, err
		}
		t.recent, evs, w.full = tail, nil, true
	} else if len(evs) > 0 {
		t.recent = append(t.recent, evs...)
		slices.SortFunc(t.recent, func(a, b job.Event) int { return cmp.Compare(a.ID, b.ID) })
		if n := len(t.recent) - timelineSize; n > 0 {
			t.recent = append([]job.Event(nil), t.recent[n:]...)
		}
	}
	// Why a queued job waits: read for jobs that have waited a moment (most
	// are claimed at once), at most every waitFactsEvery, within the tick's
	// budget; the others keep their last explanation a little longer.
	switch {
	case j.Status != job.StatusQueued:
		t.facts = nil
	case now.Sub(j.AvailableAt) < time.Second && !w.full && !w.poked:
	case st.factsBudget > 0 && (t.facts == nil || w.full || w.poked || now.Sub(t.factsAt) >= waitFactsEvery):
		st.factsBudget--
		f, err := h.d.s.Store.WaitFacts(ctx, j, workerStaleAfter)
		if err != nil {
			return nil, err
		}
		t.facts, t.factsAt = &f, now
	}
	jv := jobView(now, j, t.recent, t.facts)
	fpView := jv
	fpView.Now = time.Time{}
	out, err := h.renderVariants(ctx, w, views.IDJobSummary, fingerprint(fpView), func(v variant) templ.Component {
		return views.JobSummary(jv, v == variantOperator, "")
	})
	if err != nil {
		return nil, err
	}
	if len(evs) > 0 && !w.full {
		data, err := renderBytes(ctx, views.TimelineItems(eventViews(evs)))
		if err != nil {
			return nil, err
		}
		out = append(out, outMsg{t: t, event: views.EventTimelineAppend, variant: allVariants, data: data})
	}
	if w.full || len(w.fullFor) > 0 {
		data, err := renderBytes(ctx, views.TimelineRegion(timelineView(t.jobID, t.recent, timelineSize)))
		if err != nil {
			return nil, err
		}
		m := outMsg{t: t, event: views.IDTimelineWrap, variant: allVariants, data: data}
		if !w.full {
			m.only = w.fullFor
		}
		out = append(out, m)
	}
	return out, nil
}

// serveAggregate renders a queues, workers, locks or counts region when its
// data changed.
func (h *hub) serveAggregate(ctx context.Context, now time.Time, w work) ([]outMsg, error) {
	switch w.t.kind {
	case kindQueues:
		v, err := h.d.queuesView(ctx, now)
		if err != nil {
			return nil, err
		}
		fp := v
		fp.Now = time.Time{}
		return h.renderVariants(ctx, &w, views.IDQueues, fingerprint(fp), func(vr variant) templ.Component {
			return views.QueuesTable(v, vr == variantOperator, "")
		})
	case kindWorkers:
		v, err := h.d.workersView(ctx, now)
		if err != nil {
			return nil, err
		}
		fp := v
		fp.Now = time.Time{}
		return h.renderShared(ctx, &w, views.IDWorkers, fingerprint(fp), views.WorkersTable(v))
	case kindLocks:
		v, err := h.d.locksView(ctx, now)
		if err != nil {
			return nil, err
		}
		fp := v
		fp.Now = time.Time{}
		return h.renderShared(ctx, &w, views.IDLocks, fingerprint(fp), views.LocksTable(v))
	case kindHead:
		q, _ := url.ParseQuery(w.t.param)
		f := filterFromQuery(q.Get)
		sf := storeFilter(f)
		sf.Limit = 1
		page, err := h.d.s.Store.ListJobs(ctx, sf)
		if err != nil {
			return nil, err
		}
		newest := ""
		if len(page.Jobs) > 0 {
			newest = page.Jobs[0].ID.String()
		}
		return h.renderShared(ctx, &w, views.IDJobsNewer, fingerprint(newest), views.NewerJobs(f, newest))
	case kindCounts:
		snap, err := h.d.counts.get(ctx, countsMaxAge)
		if err != nil {
			return nil, err
		}
		c := views.QueueCounts{Queue: w.t.param, Counts: snap.statusCounts(w.t.param)}
		return h.renderShared(ctx, &w, views.IDStatusCounts, fingerprint(c), views.StatusCounts(c))
	}
	return nil, nil
}

// renderVariants renders a role-dependent region once per role watching
// it, when its fingerprint changed (or everything is to be sent).
func (h *hub) renderVariants(ctx context.Context, w *work, event string, fp uint64, comp func(variant) templ.Component) ([]outMsg, error) {
	changed := fp != w.t.fp[0] || w.full
	if !changed && len(w.fullFor) == 0 {
		return nil, nil
	}
	w.t.fp[0] = fp
	var out []outMsg
	for v := variant(0); v < nVariants; v++ {
		if !w.variants[v] {
			continue
		}
		data, err := renderBytes(ctx, comp(v))
		if err != nil {
			return nil, err
		}
		m := outMsg{t: w.t, event: event, variant: v, data: data, keep: true}
		if !changed {
			m.only = w.fullFor // unchanged: only the subscribers resyncing need it
		}
		out = append(out, m)
	}
	return out, nil
}

// renderShared renders a region that is the same for every role.
func (h *hub) renderShared(ctx context.Context, w *work, event string, fp uint64, comp templ.Component) ([]outMsg, error) {
	if fp == w.t.fp[nVariants] && !w.full {
		return nil, nil
	}
	w.t.fp[nVariants] = fp
	data, err := renderBytes(ctx, comp)
	if err != nil {
		return nil, err
	}
	return []outMsg{{t: w.t, event: event, variant: allVariants, data: data, keep: true}}, nil
}

func renderBytes(ctx context.Context, c templ.Component) ([]byte, error) {
	var b bytes.Buffer
	if err := c.Render(ctx, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
