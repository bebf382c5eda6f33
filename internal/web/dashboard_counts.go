package web

import (
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/views"
)

// Cheap counts. The dashboard never counts jobs per request or per viewer:
// one background cache per process runs
//
//	SELECT queue, status, count(*) FROM dl_jobs GROUP BY queue, status
//
// (an index-only scan of the seed's (status, queue) index) at most every
// second or two, plus a probe per queue for its oldest ready job, and every
// page and live message of every viewer reads that snapshot.
//
// Why not counters kept transactionally by triggers? Every claim, finish,
// requeue and reap would then also update a shared (queue, status) counter
// row in its own transaction. Those few rows become the hottest rows of the
// database: every worker's statements would queue on their row locks until
// commit, serializing the hot path that the queue benchmark drives at
// ≥15,000 jobs/s, and adding a plpgsql trigger with transition tables to each
// statement. The cache costs the hot path nothing; its price is a query
// whose cost grows with the table (tens of milliseconds per million rows),
// paid once per process per refresh, not per viewer, and only while someone
// looks (the cache refreshes on demand). The refresh interval also stretches
// to 10× the query's own duration, so on a huge table the dashboard spends
// at most ~10% of one connection's time counting.

// countsMaxAge is how stale counts may be for pages and live messages.
const countsMaxAge = 2 * time.Second

// countsSnapshot is what the cache holds: counts, the oldest ready job per
// queue, queue settings and live workers, read together.
type countsSnapshot struct {
	At       time.Time
	Counts   map[string]map[job.Status]int64 // queue → status → jobs
	Oldest   map[string]time.Time            // queue → oldest available_at of its queued jobs
	Settings map[string]store.QueueSetting
	Workers  []store.WorkerInfo
}

// queues returns every queue name the snapshot knows, sorted.
func (s countsSnapshot) queues() []string {
	seen := map[string]bool{}
	for q := range s.Counts {
		seen[q] = true
	}
	for q := range s.Settings {
		seen[q] = true
	}
	for _, w := range s.Workers {
		for _, q := range workerQueues(w) {
			seen[q.Name] = true
		}
	}
	out := make([]string, 0, len(seen))
	for q := range seen {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}

// statusCounts returns the counts of one queue, or of all queues when queue
// is empty, in lifecycle order.
func (s countsSnapshot) statusCounts(queue string) []views.StatusCount {
	out := make([]views.StatusCount, len(job.Statuses))
	for i, st := range job.Statuses {
		out[i].Status = string(st)
		for q, byStatus := range s.Counts {
			if queue == "" || q == queue {
				out[i].N += byStatus[st]
			}
		}
	}
	return out
}

// countsCache serves one snapshot to everyone and refreshes it at most once
// per max age, one refresh at a time. A stale snapshot is served while the
// refresh runs in the background; only the very first caller waits.
type countsCache struct {
	store *store.Store
	log   *slog.Logger

	mu         sync.Mutex
	snap       countsSnapshot
	cost       time.Duration // how long the last refresh took
	refreshing chan struct{} // closed when the running refresh ends
	wg         sync.WaitGroup
}

func newCountsCache(st *store.Store, log *slog.Logger) *countsCache {
	return &countsCache{store: st, log: log}
}

// get returns a snapshot at most maxAge old (or older when a refresh is
// running, or when refreshes are costly: see the type comment).
func (c *countsCache) get(ctx context.Context, maxAge time.Duration) (countsSnapshot, error) {
	c.mu.Lock()
	age := time.Since(c.snap.At)
	fresh := !c.snap.At.IsZero() && age < max(maxAge, 10*c.cost)
	if fresh {
		defer c.mu.Unlock()
		return c.snap, nil
	}
	if c.refreshing == nil {
		c.refreshing = make(chan struct{})
		c.wg.Add(1)
		go c.refresh(c.refreshing)
	}
	wait := c.refreshing
	if !c.snap.At.IsZero() {
		defer c.mu.Unlock()
		return c.snap, nil // stale while revalidating
	}
	c.mu.Unlock()
	select {
	case <-wait:
	case <-ctx.Done():
		return countsSnapshot{}, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap.At.IsZero() {
		return countsSnapshot{}, job.Errorf(job.CodeUnavailable, "counting jobs failed; see the server log")
	}
	return c.snap, nil
}

// invalidate makes the next get refresh (after a pause or resume).
func (c *countsCache) invalidate() {
	c.mu.Lock()
	if !c.snap.At.IsZero() {
		c.snap.At = time.Time{}.Add(1) // non-zero: still served while refreshing
	}
	c.mu.Unlock()
}

func (c *countsCache) refresh(done chan struct{}) {
	defer c.wg.Done()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	snap, err := c.load(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cost = time.Since(start)
	if err != nil {
		c.log.Warn("dashboard counts refresh failed", "error", err)
	} else {
		c.snap = snap
	}
	c.refreshing = nil
	close(done)
}

func (c *countsCache) load(ctx context.Context) (countsSnapshot, error) {
	snap := countsSnapshot{At: time.Now(), Counts: map[string]map[job.Status]int64{}, Settings: map[string]store.QueueSetting{}}
	counts, err := c.store.CountByQueueStatus(ctx)
	if err != nil {
		return snap, err
	}
	for _, qc := range counts {
		if snap.Counts[qc.Queue] == nil {
			snap.Counts[qc.Queue] = map[job.Status]int64{}
		}
		snap.Counts[qc.Queue][qc.Status] = qc.N
	}
	settings, err := c.store.QueueSettings(ctx)
	if err != nil {
		return snap, err
	}
	for _, s := range settings {
		snap.Settings[s.Queue] = s
	}
	if snap.Workers, err = c.store.Workers(ctx, workerStaleAfter*4); err != nil {
		return snap, err
	}
	var queued []string
	for q, byStatus := range snap.Counts {
		if byStatus[job.StatusQueued] > 0 {
			queued = append(queued, q)
		}
	}
	if snap.Oldest, err = c.store.OldestQueued(ctx, queued); err != nil {
		return snap, err
	}
	return snap, nil
}

// workerQueues decodes the queues JSON of a worker row.
func workerQueues(w store.WorkerInfo) []views.WorkerQueue {
	var qs []struct {
		Queue       string `json:"queue"`
		Concurrency int    `json:"concurrency"`
	}
	_ = json.Unmarshal(w.Queues, &qs)
	out := make([]views.WorkerQueue, len(qs))
	for i, q := range qs {
		out[i] = views.WorkerQueue{Name: q.Queue, Concurrency: q.Concurrency}
	}
	return out
}

// throughput keeps jobs finished per queue and minute over the last hour,
// counted from finished_at (ix_dl_jobs_finished). It recounts the current
// and the previous minute on each refresh (a finishing transaction may
// commit a little after its finished_at) and backfills a few older minutes
// per refresh, so no refresh scans the whole hour at once; a minute is final
// once counted well after its end.
type throughput struct {
	store *store.Store

	mu      sync.Mutex
	minutes map[time.Time]map[string]int64
	final   map[time.Time]bool
	next    time.Time // earliest next refresh
	busy    bool
}

// Throughput refresh pacing.
const (
	throughputEvery    = 10 * time.Second
	throughputBackfill = 10 // older minutes counted per refresh
	throughputSettle   = 30 * time.Second
)

func newThroughput(st *store.Store) *throughput {
	return &throughput{store: st, minutes: map[time.Time]map[string]int64{}, final: map[time.Time]bool{}}
}

// refresh updates the counts when due. It never runs twice at once.
func (t *throughput) refresh(ctx context.Context, now time.Time) error {
	t.mu.Lock()
	if t.busy || now.Before(t.next) {
		t.mu.Unlock()
		return nil
	}
	t.busy = true
	cur := now.Truncate(time.Minute)
	var missing []time.Time
	for m := cur.Add(-2 * time.Minute); m.After(cur.Add(-60*time.Minute)) && len(missing) < throughputBackfill; m = m.Add(-time.Minute) {
		if !t.final[m] {
			missing = append(missing, m)
		}
	}
	t.mu.Unlock()
	start := time.Now()
	defer func() {
		t.mu.Lock()
		t.busy = false
		t.next = time.Now().Add(max(throughputEvery, 20*time.Since(start)))
		t.mu.Unlock()
	}()

	recent, err := t.store.FinishedPerMinute(ctx, cur.Add(-time.Minute), now.Add(time.Minute))
	if err != nil {
		return err
	}
	var older []store.MinuteCount
	if len(missing) > 0 {
		// missing is newest first and contiguous only by chance: count the
		// span, then keep only the minutes asked for.
		if older, err = t.store.FinishedPerMinute(ctx, missing[len(missing)-1], missing[0].Add(time.Minute)); err != nil {
			return err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	set := func(minutes []time.Time, rows []store.MinuteCount, final bool) {
		want := map[time.Time]bool{}
		for _, m := range minutes {
			want[m] = true
			t.minutes[m] = map[string]int64{}
			if final {
				t.final[m] = true
			}
		}
		for _, r := range rows {
			m := r.Minute.Truncate(time.Minute)
			if want[m] {
				t.minutes[m][r.Queue] += r.N
			}
		}
	}
	prev := cur.Add(-time.Minute)
	set([]time.Time{prev, cur}, recent, false)
	if now.Sub(cur) >= throughputSettle {
		t.final[prev] = true
	}
	set(missing, older, true)
	for m := range t.minutes {
		if m.Before(cur.Add(-60 * time.Minute)) {
			delete(t.minutes, m)
			delete(t.final, m)
		}
	}
	return nil
}

// series returns a queue's per-minute counts for the hour up to now,
// oldest first (60 values, the last one the current minute).
func (t *throughput) series(queue string, now time.Time) []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := now.Truncate(time.Minute)
	out := make([]int64, 60)
	for i := range out {
		out[i] = t.minutes[cur.Add(time.Duration(i-59)*time.Minute)][queue]
	}
	return out
}
