// Command bench measures dataloader's queue engine end to end: the real
// worker.Manager with a real notify.Listener over the real queries (full
// journal, advisory locks), against a private embedded PostgreSQL cluster in
// .data/bench-pg with default (durable) settings, or a server given by -dsn.
//
//	go run ./cmd/bench [-scenario all|workdown|continuous|latency|scale] [-dsn ...]
//
// Scenarios (each in its own freshly created database bench_<scenario>):
//
//	workdown    insert -jobs no-op jobs, VACUUM ANALYZE, then time one Manager
//	            (one queue, -concurrency slots) until every job has succeeded.
//	continuous  for -duration a producer inserts batches (as fast as it can,
//	            or -rate jobs/s) while a Manager works; insert and work rates.
//	latency     enqueue → handler start: 500 jobs one at a time on an idle
//	            queue, then -latency-rate jobs/s for -latency-duration.
//	scale       Store.Claim(10) + FinishMany latency with 10k, 100k and 1M
//	            queued rows, and the plan of one claim at the largest size.
//	import      200,000 NDJSON triggers through the real import endpoint.
//	export      delivery lag of the SSE export stream under 2,000 events/s.
//
// Every figure is printed on its own line as "name: value unit" so runs can be
// compared; context lines start with "# ". Logs go to stderr. The program
// reports speed; it never fails because of it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"time"
)

// options are the command-line flags.
type options struct {
	scenario     string
	dsn          string
	dataDir      string
	jobs         int
	lockKeys     int
	concurrency  int
	pool         int
	duration     time.Duration
	rate         int
	batch        int
	latRate      int
	latDuration  time.Duration
	latIdle      int
	scaleSizes   string
	scaleIters   int
	scaleFill    string
	statements   bool
	keep         bool
	cpuProfile   string
	verbose      bool
	insertBatch  int
	scaleExplain bool
	analyzeEvery time.Duration
	pgOptions    string
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.scenario, "scenario", "all", "all, or a comma-separated list of workdown, continuous, latency, scale, import, export")
	flag.StringVar(&o.dsn, "dsn", "", "use this PostgreSQL server instead of the embedded cluster (the role must be allowed to create databases)")
	flag.StringVar(&o.dataDir, "data-dir", ".data/bench-pg", "data directory of the embedded cluster")
	flag.IntVar(&o.jobs, "jobs", 200_000, "workdown: jobs to insert and work down")
	flag.IntVar(&o.lockKeys, "lock-keys", 0, "workdown/continuous: distinct lock_keys (0: every job its own key k<i>)")
	flag.IntVar(&o.concurrency, "concurrency", 100, "handler slots of the one bench queue (the Manager's concurrency)")
	flag.IntVar(&o.pool, "pool", 0, "max connections of the Manager's pool (0: pgxpool's default, as cmd/web uses)")
	flag.IntVar(&o.insertBatch, "insert-batch", 1000, "workdown: jobs per TriggerMany statement")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "continuous: measured window")
	flag.IntVar(&o.rate, "rate", 0, "continuous: producer rate in jobs/s (0: as fast as it can)")
	flag.IntVar(&o.batch, "batch", 500, "continuous: jobs per TriggerMany statement")
	flag.IntVar(&o.latIdle, "latency-idle", 500, "latency: jobs enqueued one at a time on an idle queue")
	flag.IntVar(&o.latRate, "latency-rate", 50, "latency: steady enqueue rate in jobs/s")
	flag.DurationVar(&o.latDuration, "latency-duration", 20*time.Second, "latency: length of the steady phase")
	flag.StringVar(&o.scaleSizes, "scale-sizes", "10000,100000,1000000", "scale: queued rows per step")
	flag.IntVar(&o.scaleIters, "scale-iters", 500, "scale: timed claim+finish iterations per size")
	flag.StringVar(&o.scaleFill, "scale-fill", "copy", "scale: fill the queue with copy (COPY into dl_jobs, no journal rows) or trigger (Store.TriggerMany)")
	flag.BoolVar(&o.scaleExplain, "scale-explain", true, "scale: print the EXPLAIN (ANALYZE, BUFFERS) plan of one claim at the largest size")
	flag.DurationVar(&o.analyzeEvery, "analyze-every", 0, "continuous: also run ANALYZE dl_jobs this often (0: leave statistics to autovacuum, as in production)")
	flag.StringVar(&o.pgOptions, "pg-options", "", "experiments: session settings for every bench connection, as libpq options (e.g. \"-c plan_cache_mode=force_generic_plan\")")
	flag.BoolVar(&o.statements, "statements", false, "embedded cluster only: preload pg_stat_statements and print the costliest statements of each timed phase (changes the server's settings)")
	flag.BoolVar(&o.keep, "keep", false, "keep the bench databases after the run")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.BoolVar(&o.verbose, "v", false, "log at info level (default: warnings only)")
	flag.Parse()
	return o
}

var scenarios = []struct {
	name string
	run  func(context.Context, *bench) error
}{
	{"workdown", runWorkdown},
	{"continuous", runContinuous},
	{"latency", runLatency},
	{"scale", runScale},
	{"import", runImport},
	{"export", runExport},
	{"dashboard", runDashboard},
	{"etl", runETL},
}

func main() {
	o := parseFlags()
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, log); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, log *slog.Logger) error {
	want := map[string]bool{}
	for _, s := range strings.Split(o.scenario, ",") {
		want[strings.TrimSpace(s)] = true
	}
	var selected []string
	for _, s := range scenarios {
		if want["all"] || want[s.name] {
			selected = append(selected, s.name)
			delete(want, s.name)
		}
	}
	delete(want, "all")
	if len(want) > 0 || len(selected) == 0 {
		return fmt.Errorf("unknown -scenario %q (want all, workdown, continuous, latency, scale, import or export)", o.scenario)
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	b, err := newBench(ctx, o, log)
	if err != nil {
		return err
	}
	defer b.close(context.WithoutCancel(ctx))
	b.header()
	start := time.Now()
	for _, s := range scenarios {
		if !contains(selected, s.name) {
			continue
		}
		note("")
		note("== %s ==", s.name)
		t0 := time.Now()
		err := s.run(ctx, b)
		b.done(context.WithoutCancel(ctx), s.name)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		note("%s took %s", s.name, time.Since(t0).Round(100*time.Millisecond))
	}
	note("")
	note("total %s", time.Since(start).Round(100*time.Millisecond))
	return nil
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// figure prints one comparable result line.
func figure(name string, v float64, unit string) {
	var s string
	switch {
	case v >= 100 || v == float64(int64(v)):
		s = fmt.Sprintf("%.0f", v)
	case v >= 10:
		s = fmt.Sprintf("%.1f", v)
	default:
		s = fmt.Sprintf("%.2f", v)
	}
	if unit == "" {
		fmt.Printf("%s: %s\n", name, s)
		return
	}
	fmt.Printf("%s: %s %s\n", name, s, unit)
}

// note prints a context line.
func note(format string, args ...any) {
	fmt.Printf("# "+format+"\n", args...)
}
