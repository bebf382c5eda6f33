package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/internal/worker"
)

// sleepTask is the watched jobs' task: it runs long enough for a client to
// open the job's page while it runs.
const sleepTask = "bench.sleep"

// dashLive measures what live viewers cost the workers, and how fast they
// see watched jobs end.
func dashLive(ctx context.Context, b *bench) error {
	// Alternate without and with clients, three rounds, and compare the best
	// of each: on a shared machine other load only ever slows a round down.
	var rates [2][]float64
	for round := 0; round < 3; round++ {
		for i, clients := range []int{0, dashOpt.clients} {
			r, err := dashCapacity(ctx, b, fmt.Sprintf("dashboard_cap%d", i), clients)
			if err != nil {
				return err
			}
			rates[i] = append(rates[i], r)
		}
	}
	base, with := slices.Max(rates[0]), slices.Max(rates[1])
	note("rounds without clients %.0f, with clients %.0f jobs/s (means %.0f and %.0f)", rates[0], rates[1],
		mean(rates[0]), mean(rates[1]))
	figure("dash_workers_jobs_per_sec_without_clients", base, "jobs/s")
	figure("dash_workers_jobs_per_sec_with_clients", with, "jobs/s")
	figure("dash_workers_throughput_drop_pct", 100*(base-with)/base, "%")
	return dashLatency(ctx, b)
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// liveEnv is a database with workers and the dashboard server on it.
type liveEnv struct {
	dsn  string
	st   *store.Store
	prod *store.Store
	w    *workers
	d    *dashServer
	// recent holds ids of jobs just produced, for clients to watch.
	mu     sync.Mutex
	recent []uuid.UUID
}

func startLiveEnv(ctx context.Context, b *bench, name string) (*liveEnv, error) {
	dsn, err := b.database(ctx, name)
	if err != nil {
		return nil, err
	}
	e := &liveEnv{dsn: dsn}
	if e.st, err = b.open(ctx, dsn, 0); err != nil {
		return nil, err
	}
	if e.prod, err = b.open(ctx, dsn, 4); err != nil {
		return nil, err
	}
	ws, err := b.openWorker(ctx, dsn, b.o.pool)
	if err != nil {
		return nil, err
	}
	e.w, err = b.startWorkers(ctx, dsn, ws, 150, func(r *worker.Registry) {
		r.MustRegister(sleepTask, worker.Task{Handler: job.HandlerFunc(func(ctx context.Context, _ job.Run) error {
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(200 * time.Millisecond):
				return nil
			}
		})})
	})
	if err != nil {
		return nil, err
	}
	// The server shares the workers' one LISTEN connection, as in cmd/web.
	if e.d, err = startDashServer(ctx, b, dsn, e.st, e.w.l); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *liveEnv) close() {
	e.d.close()
	if err := e.w.close(); err != nil {
		note("workers: %v", err)
	}
	e.prod.Pool().Close()
	e.st.Pool().Close()
}

// trigger is the producer's insert, remembering the newest ids.
func (e *liveEnv) trigger(ctx context.Context, jobs []store.NewJob, ttl int) ([]uuid.UUID, error) {
	ids, err := e.prod.TriggerMany(ctx, jobs, ttl)
	if err == nil && len(ids) > 0 {
		e.mu.Lock()
		e.recent = append(e.recent[:0], ids[max(0, len(ids)-50):]...)
		e.mu.Unlock()
	}
	return ids, err
}

func (e *liveEnv) pick(n int) []uuid.UUID {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]uuid.UUID(nil), e.recent[:min(n, len(e.recent))]...)
}

// dashCapacity works down a backlog of no-op jobs and returns the jobs/s,
// with clients SSE clients connected meanwhile: each watches the overview,
// the status counts and 20 rows of its own of the backlog, and moves to the
// next 20 rows (a new page load, so new topics) every 10 s, as busy people
// paging through the list would. The clients run in the bench process,
// beside the workers, so their own reading is charged to the workers too.
func dashCapacity(ctx context.Context, b *bench, name string, clients int) (float64, error) {
	e, err := startLiveEnv(ctx, b, name)
	if err != nil {
		return 0, err
	}
	defer b.done(context.WithoutCancel(ctx), name)
	defer e.close()
	n := dashOpt.rate * int(dashOpt.phase.Seconds()) * 2
	// Warm up (connections, prepared statements), then hold the workers until the backlog is in and the clients watch.
	if _, err := e.prod.TriggerMany(ctx, noopBatch(-1000, 500, 0), leaseTTL); err != nil {
		return 0, err
	}
	if _, ok := e.w.waitSucceeded(ctx, 500, 10*time.Second); !ok {
		note("WARNING: warm-up jobs did not finish within 10 s")
	}
	if err := e.st.SetQueuePaused(ctx, benchQueue, true, "bench"); err != nil {
		return 0, err
	}
	var ids []uuid.UUID
	for done := 0; done < n; done += 1000 {
		got, err := e.prod.TriggerMany(ctx, noopBatch(done, min(1000, n-done), 0), leaseTTL)
		if err != nil {
			return 0, err
		}
		ids = append(ids, got...)
	}
	if _, err := vacuumAnalyze(ctx, e.st.Pool()); err != nil {
		return 0, err
	}
	cctx, stopClients := context.WithCancel(ctx)
	defer stopClients()
	var wg sync.WaitGroup
	defer wg.Wait()
	var events atomic.Int64
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for page := 0; cctx.Err() == nil; page++ {
				topics := []string{"queues", "counts:"}
				for k := 0; k < 20; k++ {
					topics = append(topics, "row:"+ids[(i*20+page*clients*20+k)%len(ids)].String())
				}
				wctx, cancel := context.WithTimeout(cctx, 10*time.Second)
				_ = e.d.watch(wctx, topics, func(sseEvent) bool { events.Add(1); return false })
				cancel()
			}
		}(i)
	}
	time.Sleep(2 * time.Second) // clients connected and served
	start := time.Now()
	worked0 := e.w.succeeded()
	if err := e.st.SetQueuePaused(ctx, benchQueue, false, "bench"); err != nil {
		return 0, err
	}
	end, ok := e.w.waitSucceeded(ctx, worked0+int64(n), 5*time.Minute)
	stopClients()
	wg.Wait()
	if !ok {
		return 0, fmt.Errorf("%s: the backlog was not worked down within 5 minutes", name)
	}
	rate := float64(n) / end.Sub(start).Seconds()
	note("%s: worked down %d jobs in %s with %d SSE clients watching (%d messages received): %.0f jobs/s",
		name, n, end.Sub(start).Round(time.Millisecond), clients, events.Load(), rate)
	return rate, nil
}

// dashLatency: jobs flow at -dash-rate; each client repeatedly triggers a
// watched job (200 ms of work), opens its job page's stream and waits for
// the final state; the delay is from the job's finished_at to the client
// reading the message.
func dashLatency(ctx context.Context, b *bench) error {
	const name = "dashboard_live"
	e, err := startLiveEnv(ctx, b, name)
	if err != nil {
		return err
	}
	defer b.done(context.WithoutCancel(ctx), name)
	defer e.close()
	bb := *b
	bb.o.rate, bb.o.batch = dashOpt.rate, max(1, dashOpt.rate/20)
	start := time.Now()
	end := start.Add(dashOpt.phase)
	var inserted atomic.Int64
	var pwg sync.WaitGroup
	var perr error
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		perr = produce(ctx, &bb, e.trigger, start, end, &inserted)
	}()
	worked0 := e.w.succeeded()

	type seen struct {
		id uuid.UUID
		at time.Time
	}
	var mu sync.Mutex
	var got []seen
	var missed atomic.Int64
	var cwg sync.WaitGroup
	for i := 0; i < dashOpt.clients; i++ {
		cwg.Add(1)
		go func(i int) {
			defer cwg.Done()
			for time.Now().Before(end) && ctx.Err() == nil {
				res, err := e.prod.Trigger(ctx, job.TriggerParams{Queue: benchQueue, Task: sleepTask,
					LockKey: fmt.Sprintf("watch-%d", i)}, leaseTTL)
				if err != nil {
					return
				}
				id := res.JobID.String()
				final := fmt.Sprintf(`data-status="%s"`, job.StatusSucceeded)
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				var at time.Time
				_ = e.d.watch(wctx, []string{"job:" + id, "row:" + id}, func(ev sseEvent) bool {
					if ev.event == "job-row-"+id && strings.Contains(ev.data, final) {
						at = time.Now()
						return true
					}
					return false
				})
				cancel()
				if at.IsZero() {
					missed.Add(1)
					continue
				}
				mu.Lock()
				got = append(got, seen{res.JobID, at})
				mu.Unlock()
			}
		}(i)
	}
	cwg.Wait()
	pwg.Wait()
	elapsed := time.Since(start)
	worked := e.w.succeeded() - worked0
	if perr != nil {
		return perr
	}
	ids := make([]uuid.UUID, len(got))
	for i, s := range got {
		ids[i] = s.id
	}
	jobs, err := e.st.JobsByIDs(ctx, ids)
	if err != nil {
		return err
	}
	finished := map[uuid.UUID]time.Time{}
	for _, j := range jobs {
		if j.FinishedAt != nil {
			finished[j.ID] = *j.FinishedAt
		}
	}
	var delays []time.Duration
	within := 0
	for _, s := range got {
		d := s.at.Sub(finished[s.id])
		delays = append(delays, d)
		if d <= time.Second {
			within++
		}
	}
	note("live: %d SSE clients, producer %d jobs/s (inserted %d), workers finished %d jobs in %s (%.0f jobs/s)",
		dashOpt.clients, dashOpt.rate, inserted.Load(), worked, elapsed.Round(time.Millisecond), float64(worked)/elapsed.Seconds())
	note("live: %d watched jobs seen final, %d not seen within 30 s; delay finished_at → client: %s",
		len(got), missed.Load(), durSummary(delays))
	figure("dash_live_watched_jobs", float64(len(got)), "jobs")
	figure("dash_live_final_state_p50_ms", ms(percentile(delays, 0.5)), "ms")
	figure("dash_live_final_state_p95_ms", ms(percentile(delays, 0.95)), "ms")
	figure("dash_live_final_state_p99_ms", ms(percentile(delays, 0.99)), "ms")
	figure("dash_live_final_state_max_ms", ms(percentile(delays, 1)), "ms")
	if len(got) > 0 {
		figure("dash_live_final_state_within_1s_pct", 100*float64(within)/float64(len(got)+int(missed.Load())), "%")
	}
	return nil
}

// sseEvent is one received server-sent event.
type sseEvent struct{ event, data string }

// watch streams the topics until ctx ends, the stream ends or done
// returns true.
func (d *dashServer) watch(ctx context.Context, topics []string, done func(sseEvent) bool) error {
	q := url.Values{"t": topics}
	q.Set("since", "0.0")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/live?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	res, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("stream: status %d", res.StatusCode)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var ev sseEvent
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			ev.data = data.String()
			if ev.event != "" && done(ev) {
				return nil
			}
			ev = sseEvent{}
			data.Reset()
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(line[6:])
		}
	}
	return sc.Err()
}

// dashIndexes are the indexes migrations/00004_dashboard.sql adds.
var dashIndexes = []string{"ix_dl_jobs_queue_id", "ix_dl_jobs_status_id", "ix_dl_jobs_task_id", "ix_dl_jobs_lock_key_id", "ix_dl_jobs_finished"}

// dashIndexCost measures what the dashboard's indexes cost the hot path:
// a backlog worked down with them and, on another database, without them
// (three alternating rounds, best of each).
func dashIndexCost(ctx context.Context, b *bench) error {
	n := dashOpt.rate * int(dashOpt.phase.Seconds()) * 2
	var rates [2][]float64
	for round := 0; round < 3; round++ {
		for i, drop := range []bool{false, true} {
			name := fmt.Sprintf("dashboard_ix%d", i)
			dsn, err := b.database(ctx, name)
			if err != nil {
				return err
			}
			st, err := b.openWorker(ctx, dsn, b.o.pool)
			if err != nil {
				return err
			}
			if drop {
				for _, ix := range dashIndexes {
					if _, err := st.Pool().Exec(ctx, "DROP INDEX "+ix); err != nil {
						return err
					}
				}
			}
			if _, err := triggerMany(ctx, st, n, 1000, 0); err != nil {
				return err
			}
			if _, err := vacuumAnalyze(ctx, st.Pool()); err != nil {
				return err
			}
			w, err := b.startWorkers(ctx, dsn, st, b.o.concurrency, nil)
			if err != nil {
				return err
			}
			start := time.Now()
			end, ok := w.waitSucceeded(ctx, int64(n), 5*time.Minute)
			if cerr := w.close(); cerr != nil {
				note("workers: %v", cerr)
			}
			st.Pool().Close()
			b.done(context.WithoutCancel(ctx), name)
			if !ok {
				return fmt.Errorf("%s: backlog not worked down within 5 minutes", name)
			}
			rates[i] = append(rates[i], float64(n)/end.Sub(start).Seconds())
		}
	}
	with, without := slices.Max(rates[0]), slices.Max(rates[1])
	note("workdown of %d jobs: with the dashboard indexes %.0f, without %.0f jobs/s per round", n, rates[0], rates[1])
	figure("dash_index_workdown_jobs_per_sec_with", with, "jobs/s")
	figure("dash_index_workdown_jobs_per_sec_without", without, "jobs/s")
	figure("dash_index_cost_pct", 100*(without-with)/without, "%")
	return nil
}
