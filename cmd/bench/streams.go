package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/journal"
	"github.com/dataloader/dataloader/internal/metrics"
	"github.com/dataloader/dataloader/internal/notify"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/internal/web"
)

// streamServer is the real HTTP server (import and export handlers, auth,
// journal tailer) over a bench database, with an operator token.
type streamServer struct {
	ts     *httptest.Server
	token  string
	stop   func()
	tailer *journal.Tailer
}

func (b *bench) startStreamServer(ctx context.Context, dsn string, st *store.Store) (*streamServer, error) {
	_, secret, err := st.CreateToken(ctx, "bench", auth.RoleOperator, "bench")
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	tl := journal.New(st, quiet)
	tctx, cancel := context.WithCancel(ctx)
	// Woken by notifications as in the product (see app.pokeJournal).
	l := notify.New(dsn, quiet, notify.ChannelJobs, notify.ChannelDone)
	jobs, done := l.Subscribe(notify.ChannelJobs, 16), l.Subscribe(notify.ChannelDone, 16)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); _ = tl.Run(tctx) }()
	go func() { defer wg.Done(); _ = l.Run(tctx) }()
	go func() { defer wg.Done(); tl.WakeOn(tctx, jobs, done) }()
	srv := web.New(web.Deps{Store: st, Journal: tl, Metrics: metrics.New(), Log: quiet, DSN: dsn, Version: "bench"})
	ts := httptest.NewServer(srv)
	return &streamServer{ts: ts, token: secret, tailer: tl, stop: func() {
		srv.SetReady(false)
		ts.Close()
		cancel()
		wg.Wait()
	}}, nil
}

// runImport posts NDJSON triggers (each with an idempotency key) through the
// real import endpoint and times the whole stream until its summary line.
func runImport(ctx context.Context, b *bench) error {
	dsn, err := b.database(ctx, "import")
	if err != nil {
		return err
	}
	st, err := b.open(ctx, dsn, 0)
	if err != nil {
		return err
	}
	defer st.Pool().Close()
	srv, err := b.startStreamServer(ctx, dsn, st)
	if err != nil {
		return err
	}
	defer srv.stop()
	const lines = 200_000
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriterSize(pw, 256<<10)
		for i := 0; i < lines; i++ {
			fmt.Fprintf(bw, `{"queue":"bench","task":"bench.noop","lock_key":"k%d","idempotency_key":"imp-%d","args":{"n":%d}}`+"\n", i, i, i)
		}
		_ = bw.Flush()
		pw.Close()
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.ts.URL+"/api/v1/jobs/import", pr)
	req.Header.Set("Authorization", "Bearer "+srv.token)
	req.Header.Set("Content-Type", "application/x-ndjson")
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var acks int
	var summary string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), `{"summary"`) {
			summary = sc.Text()
			break
		}
		acks++
	}
	took := time.Since(start)
	note("imported %d NDJSON lines (idempotency keys, 1,000 lines per insert statement) in %s; %d acks; %s", lines, took.Round(time.Millisecond), acks, summary)
	figure("import_jobs_per_sec", float64(lines)/took.Seconds(), "jobs/s")
	return nil
}

// runExport writes journal events at a steady 2,000 events/s (batches of 20
// triggers every 10 ms, one queued event each) while an SSE client follows
// the export stream, and measures delivery lag: receipt time minus the
// event's commit-side timestamp.
func runExport(ctx context.Context, b *bench) error {
	dsn, err := b.database(ctx, "export")
	if err != nil {
		return err
	}
	st, err := b.open(ctx, dsn, 0)
	if err != nil {
		return err
	}
	defer st.Pool().Close()
	srv, err := b.startStreamServer(ctx, dsn, st)
	if err != nil {
		return err
	}
	defer srv.stop()

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(cctx, http.MethodGet, srv.ts.URL+"/api/v1/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+srv.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var mu sync.Mutex
	var lags []time.Duration
	received := 0
	go func() {
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "data: ") {
				continue
			}
			var ev struct {
				TS time.Time `json:"ts"`
			}
			if json.Unmarshal([]byte(line[6:]), &ev) != nil || ev.TS.IsZero() {
				continue
			}
			mu.Lock()
			lags = append(lags, time.Since(ev.TS))
			received++
			mu.Unlock()
		}
	}()

	const perBatch, every = 20, 10 * time.Millisecond
	window := 20 * time.Second
	tick := time.NewTicker(every)
	defer tick.Stop()
	sent := 0
	end := time.Now().Add(window)
	for i := 0; time.Now().Before(end); i++ {
		<-tick.C
		jobs := make([]store.NewJob, perBatch)
		for j := range jobs {
			jobs[j] = store.NewJob{Queue: "bench", Task: "bench.noop", LockKey: fmt.Sprintf("k%d-%d", i, j)}
		}
		if _, err := st.TriggerMany(ctx, jobs, 60); err != nil {
			return err
		}
		sent += perBatch
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := received
		mu.Unlock()
		if n >= sent || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	note("wrote %d events at %.0f events/s for %s; the stream delivered %d", sent, float64(sent)/window.Seconds(), window, received)
	figure("export_events_per_sec", float64(sent)/window.Seconds(), "events/s")
	figure("export_lag_p50_ms", ms(percentile(lags, 0.50)), "ms")
	figure("export_lag_p99_ms", ms(percentile(lags, 0.99)), "ms")
	figure("export_lag_max_ms", ms(percentile(lags, 1)), "ms")
	return nil
}
