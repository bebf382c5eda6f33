package main

import (
	"context"
	"encoding/binary"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/metrics"
	"github.com/dataloader/dataloader/internal/notify"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/internal/web"
)

// The dashboard scenario (go run ./cmd/bench -scenario dashboard):
//
//  1. lists: -dash-rows jobs (1,000,000) in a realistic mix (queues and
//     tasks of skewed sizes, 96% finished, a recent backlog and an old
//     low-priority one, 2% failed), then the server time of the jobs list
//     under several filters, deep pages and a text search, of the job page
//     and of the queues overview, over HTTP on loopback from a signed-in
//     client, one request at a time: p50/p95/p99 per page.
//  2. live: worker throughput (producer as fast as it can, -dash-phase long)
//     without and then with -dash-clients SSE clients watching the
//     overview and rows of jobs in flight; then, with the clients and jobs
//     flowing at -dash-rate jobs/s, how long after a watched job finished
//     its client saw the final state.
//  3. index cost: a backlog worked down with and without the indexes of
//     migrations/00004_dashboard.sql (what the list's speed costs the hot
//     path).
var dashOpt struct {
	parts    string
	rows     int
	clients  int
	rate     int
	phase    time.Duration
	requests int
}

func init() {
	flag.StringVar(&dashOpt.parts, "dash-parts", "lists,live,index", "dashboard: which parts to run")
	flag.IntVar(&dashOpt.rows, "dash-rows", 1_000_000, "dashboard: jobs in the table for the list and overview timings")
	flag.IntVar(&dashOpt.clients, "dash-clients", 200, "dashboard: concurrent SSE clients")
	flag.IntVar(&dashOpt.rate, "dash-rate", 2000, "dashboard: jobs/s flowing while the clients watch")
	flag.DurationVar(&dashOpt.phase, "dash-phase", 15*time.Second, "dashboard: length of each live phase")
	flag.IntVar(&dashOpt.requests, "dash-requests", 200, "dashboard: timed requests per page")
}

func runDashboard(ctx context.Context, b *bench) error {
	for _, part := range []struct {
		name string
		run  func(context.Context, *bench) error
	}{{"lists", dashLists}, {"live", dashLive}, {"index", dashIndexCost}} {
		if !slices.Contains(strings.Split(dashOpt.parts, ","), part.name) {
			continue
		}
		if err := part.run(ctx, b); err != nil {
			return fmt.Errorf("%s: %w", part.name, err)
		}
		b.done(context.WithoutCancel(ctx), "dashboard")
	}
	return nil
}

// dashQueues is the mix of the filled table: queue, weight (per mille) and
// its tasks.
var dashQueues = []struct {
	name   string
	weight int
	tasks  []string
}{
	{"etl.orders", 400, []string{"etl.load"}},
	{"deliver", 250, []string{"http.deliver"}},
	{"etl.users", 200, []string{"etl.load", "etl.merge"}},
	{"reports", 140, []string{"report.daily", "report.weekly"}},
	{"backfill", 9, []string{"etl.backfill"}},
	{"audit", 1, []string{"audit.export"}},
}

// fillDashboard COPYs n jobs created over the last 7 days, oldest first.
func fillDashboard(ctx context.Context, pool *pgxpool.Pool, n int) error {
	rng := mrand.New(mrand.NewPCG(1, 2))
	start := time.Now().Add(-7 * 24 * time.Hour)
	step := 7 * 24 * time.Hour / time.Duration(n)
	const batch = 100_000
	for first := 0; first < n; first += batch {
		last := min(first+batch, n)
		pr, pw := io.Pipe()
		go func() {
			w := csv.NewWriter(pw)
			for i := first; i < last; i++ {
				created := start.Add(time.Duration(i) * step)
				_ = w.Write(dashRow(rng, i, n, created))
			}
			w.Flush()
			pw.CloseWithError(w.Error())
		}()
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		_, err = conn.Conn().PgConn().CopyFrom(ctx, pr, `COPY dl_jobs (job_id, queue, task, args, lock_key, priority,
			available_at, status, attempt, max_attempts, lease_ttl_sec, error, created_at, started_at, finished_at,
			heartbeat_at, lease_expires_at, worker_id, progress) FROM STDIN WITH (FORMAT csv)`)
		conn.Release()
		pr.Close()
		if err != nil {
			return fmt.Errorf("copy rows %d..%d: %w", first, last, err)
		}
	}
	return nil
}

// dashRow is job i of n as a CSV record (an empty field is NULL).
func dashRow(rng *mrand.Rand, i, n int, created time.Time) []string {
	pick := rng.IntN(1000)
	q := dashQueues[0]
	for _, c := range dashQueues {
		if pick < c.weight {
			q = c
			break
		}
		pick -= c.weight
	}
	task := q.tasks[rng.IntN(len(q.tasks))]
	account := rng.IntN(200_000)
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	status, priority := "succeeded", 100
	switch frac := float64(i) / float64(n); {
	case frac > 0.95: // the recent backlog
		switch r := rng.IntN(1000); {
		case r < 600:
			status = "queued"
		case r < 602:
			status = "running"
		}
	case q.name == "backfill" && frac > 0.10 && frac < 0.30: // an old, low-priority backlog
		status, priority = "queued", 500
	default:
		switch r := rng.IntN(1000); {
		case r < 20:
			status = "failed"
		case r < 30:
			status = "canceled"
		case r < 35:
			status = "lost"
		}
	}
	rec := []string{uuidV7At(created, rng).String(), q.name, task,
		fmt.Sprintf(`{"account": %d, "source": "s3://exports/%s/%d.csv", "rows": %d}`, account, q.name, account, rng.IntN(100_000)),
		"acct-" + strconv.Itoa(account), strconv.Itoa(priority), ts(created), status, "0", "5", "60",
		"", ts(created), "", "", "", "", "", `{}`}
	switch status {
	case "queued":
	case "running":
		rec[8], rec[13], rec[15], rec[16], rec[17] = "1", ts(created), ts(time.Now()), ts(time.Now().Add(time.Hour)), "bench-fill"
		rec[18] = `{"done": 10, "total": 100, "unit": "rows"}`
	default:
		fin := created.Add(time.Duration(1+rng.IntN(60)) * time.Second)
		rec[8], rec[13], rec[14] = "1", ts(created), ts(fin)
		if status != "succeeded" {
			rec[11] = fmt.Sprintf("upstream answered 503 for account %d", account)
		}
	}
	return rec
}

// uuidV7At makes a UUIDv7 for time t (the fill's ids must follow its
// created_at, as real ones do).
func uuidV7At(t time.Time, rng *mrand.Rand) uuid.UUID {
	var u uuid.UUID
	ms := uint64(t.UnixMilli())
	binary.BigEndian.PutUint64(u[8:], rng.Uint64())
	var hi [8]byte
	binary.BigEndian.PutUint64(hi[:], ms<<16|uint64(rng.Uint32()&0xfff))
	copy(u[:8], hi[:])
	u[6] = (u[6] & 0x0f) | 0x70
	u[8] = (u[8] & 0x3f) | 0x80
	return u
}

// dashServer is the real web server on loopback with one signed-in
// client.
type dashServer struct {
	base   string
	client *http.Client
	srv    *http.Server
	web    *web.Server
}

// startDashServer serves web.New over st (and l, for live wake-ups) and
// signs a viewer-and-more user in.
func startDashServer(ctx context.Context, b *bench, dsn string, st *store.Store, l *notify.Listener) (*dashServer, error) {
	ws := web.New(web.Deps{Store: st, Listener: l, Metrics: metrics.New(), Log: b.log, DSN: dsn, Version: "bench"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: ws, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	d := &dashServer{base: "http://" + ln.Addr().String(), srv: srv, web: ws}
	pw := "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	hash, err := auth.HashPassword(pw)
	if err != nil {
		return nil, err
	}
	if err := st.CreateUser(ctx, "bench", hash, auth.RoleOperator); err != nil {
		return nil, err
	}
	jar, _ := cookiejar.New(nil)
	d.client = &http.Client{Jar: jar, Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 0},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	page, err := d.get(ctx, "/login")
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile(`<meta name="csrf-token" content="([^"]*)"`).FindStringSubmatch(page)
	if m == nil {
		return nil, errors.New("no CSRF token on the sign-in page")
	}
	form := url.Values{"_csrf": {m[1]}, "username": {"bench"}, "password": {pw}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("sign in: status %d", res.StatusCode)
	}
	return d, nil
}

func (d *dashServer) close() {
	d.web.SetReady(false) // ends the live streams
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = d.srv.Shutdown(ctx)
}

// get fetches a page and fails on any status but 200.
func (d *dashServer) get(ctx context.Context, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+path, nil)
	if err != nil {
		return "", err
	}
	res, err := d.client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: status %d", path, res.StatusCode)
	}
	return string(body), nil
}

// dashLists fills the table and times the list pages and the overview.
func dashLists(ctx context.Context, b *bench) error {
	dsn, err := b.database(ctx, "dashboard")
	if err != nil {
		return err
	}
	st, err := b.open(ctx, dsn, 0)
	if err != nil {
		return err
	}
	pool := st.Pool()
	defer pool.Close()
	t0 := time.Now()
	if err := fillDashboard(ctx, pool, dashOpt.rows); err != nil {
		return err
	}
	note("filled %d jobs with COPY in %s", dashOpt.rows, time.Since(t0).Round(100*time.Millisecond))
	if _, err := vacuumAnalyze(ctx, pool); err != nil {
		return err
	}
	var size string
	_ = pool.QueryRow(ctx, `SELECT pg_size_pretty(pg_total_relation_size('dl_jobs'))`).Scan(&size)
	note("dl_jobs with its indexes: %s", size)

	// What one refresh of the background counts cache costs at this size.
	var samples []time.Duration
	for i := 0; i < 5; i++ {
		t := time.Now()
		if _, err := st.CountByQueueStatus(ctx); err != nil {
			return err
		}
		samples = append(samples, time.Since(t))
	}
	figure("dash_counts_refresh_ms", ms(percentile(samples, 0.5)), "ms")

	d, err := startDashServer(ctx, b, dsn, st, nil)
	if err != nil {
		return err
	}
	defer d.close()

	// Values that exist in the table, read as a user would find them.
	var lockKey, mid, textHit, failedID string
	_ = pool.QueryRow(ctx, `SELECT lock_key FROM dl_jobs WHERE status = 'failed' ORDER BY job_id DESC LIMIT 1`).Scan(&lockKey)
	_ = pool.QueryRow(ctx, `SELECT job_id::text FROM dl_jobs WHERE queue = 'deliver' ORDER BY job_id LIMIT 1 OFFSET 100000`).Scan(&mid)
	_ = pool.QueryRow(ctx, `SELECT args->>'account' FROM dl_jobs ORDER BY job_id DESC LIMIT 1 OFFSET 5000`).Scan(&textHit)
	_ = pool.QueryRow(ctx, `SELECT job_id::text FROM dl_jobs WHERE status = 'failed' LIMIT 1`).Scan(&failedID)
	pages := []struct{ name, path string }{
		{"list_all", "/jobs"},
		{"list_queue", "/jobs?queue=etl.orders"},
		{"list_queue_rare", "/jobs?queue=audit"},
		{"list_status_failed", "/jobs?status=failed"},
		{"list_status_queued", "/jobs?status=queued"},
		{"list_status_lost", "/jobs?status=lost"},
		{"list_queue_status", "/jobs?queue=backfill&status=queued"},
		{"list_queue_task_status", "/jobs?queue=etl.users&task=etl.merge&status=failed"},
		{"list_task", "/jobs?task=report.weekly"},
		{"list_lock_key", "/jobs?lock_key=" + url.QueryEscape(lockKey)},
		{"list_deep_page", "/jobs?queue=deliver&before=" + mid},
		{"list_text", "/jobs?q=" + url.QueryEscape(`"account": `+textHit+",")},
		{"list_text_none", "/jobs?q=no-such-text"},
		{"job_page", "/jobs/" + failedID},
		{"overview", "/queues"},
		{"overview_fragment", "/queues?fragment=queues-table"},
	}
	note("timing %d requests per page (one at a time, after 10 warm-up requests) against %d jobs", dashOpt.requests, dashOpt.rows)
	for _, p := range pages {
		for i := 0; i < 10; i++ {
			if _, err := d.get(ctx, p.path); err != nil {
				return err
			}
		}
		samples = samples[:0]
		for i := 0; i < dashOpt.requests; i++ {
			t := time.Now()
			if _, err := d.get(ctx, p.path); err != nil {
				return err
			}
			samples = append(samples, time.Since(t))
		}
		note("%-24s %s", p.name, durSummary(samples))
		figure("dash_"+p.name+"_p95_ms", ms(percentile(samples, 0.95)), "ms")
	}
	return nil
}
