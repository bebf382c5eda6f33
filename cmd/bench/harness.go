package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/metrics"
	"github.com/dataloader/dataloader/internal/notify"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/internal/worker"
)

// Names shared by the scenarios.
const (
	benchQueue = "bench"
	noopTask   = "bench.noop"
	leaseTTL   = 60
)

// workers is one running Manager with its own Listener, as cmd/web wires
// them, and a no-op task that counts its calls.
type workers struct {
	m       *worker.Manager
	met     *metrics.Metrics
	l       *notify.Listener
	handled atomic.Int64
	stop    context.CancelFunc
	wg      sync.WaitGroup
	errs    []error
	mu      sync.Mutex
}

// startWorkers starts a Manager working benchQueue with the given handler
// slots. extra registers more tasks beside bench.noop.
func (b *bench) startWorkers(ctx context.Context, dsn string, st *store.Store, concurrency int, extra func(*worker.Registry)) (*workers, error) {
	w := &workers{met: metrics.New()}
	reg := worker.NewRegistry()
	reg.MustRegister(noopTask, worker.Task{Handler: job.HandlerFunc(func(context.Context, job.Run) error {
		w.handled.Add(1)
		return nil
	})})
	if extra != nil {
		extra(reg)
	}
	w.l = notify.New(dsn, b.log, notify.ChannelJobs, notify.ChannelCancel, notify.ChannelDone)
	w.m = worker.New(worker.Config{
		WorkerID:      fmt.Sprintf("bench-%d", time.Now().UnixNano()),
		Queues:        []worker.QueueConfig{{Name: benchQueue, Concurrency: concurrency}},
		ShutdownGrace: 10 * time.Second,
		Version:       "bench",
	}, dsn, st, w.l, reg, b.log, w.met)

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	lctx, stopListener := context.WithCancel(context.WithoutCancel(ctx))
	w.stop = cancel
	w.wg.Add(2)
	go func() {
		defer w.wg.Done()
		w.record(w.l.Run(lctx))
	}()
	go func() {
		defer w.wg.Done()
		defer stopListener()
		w.record(w.m.Run(runCtx))
	}()
	// Notifications sent before LISTEN would be missed (the poll would still
	// find the jobs, seconds later): wait for the connection.
	deadline := time.Now().Add(10 * time.Second)
	for !w.l.State().Connected {
		if time.Now().After(deadline) {
			w.close()
			return nil, errors.New("listener did not connect within 10 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
	return w, nil
}

func (w *workers) record(err error) {
	if err == nil {
		return
	}
	w.mu.Lock()
	w.errs = append(w.errs, err)
	w.mu.Unlock()
}

// close shuts the Manager down (grace, hand-back) and then the listener.
func (w *workers) close() error {
	w.stop()
	w.wg.Wait()
	return errors.Join(w.errs...)
}

// succeeded is how many outcomes 'succeeded' the Manager has committed.
func (w *workers) succeeded() int64 {
	return int64(counterValue(w.met.Completed.WithLabelValues(benchQueue, string(job.StatusSucceeded))))
}

// waitSucceeded polls the committed-outcome counter until it reaches n, ctx
// ends or timeout passes; it returns when the count was first seen.
func (w *workers) waitSucceeded(ctx context.Context, n int64, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for {
		now := time.Now()
		if w.succeeded() >= n {
			return now, true
		}
		if now.After(deadline) || ctx.Err() != nil {
			return now, false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// summary prints what the Manager's own metrics say about where its time
// went: the claim and finish statements and their batch sizes.
func (w *workers) summary() {
	claimH := histogramOf(w.met.ClaimSeconds.WithLabelValues(benchQueue).(prometheus.Metric))
	finishH := histogramOf(w.met.FinishSeconds)
	claimed := counterValue(w.met.Claimed.WithLabelValues(benchQueue))
	done := w.succeeded()
	conflicts := counterValue(w.met.LockConflicts.WithLabelValues(benchQueue))
	note("manager claim statements: %s; %.1f jobs per claim", claimH, ratio(claimed, float64(claimH.count)))
	note("manager finish statements: %s; %.1f jobs per finish", finishH, ratio(float64(done), float64(finishH.count)))
	if conflicts > 0 {
		note("manager lock conflicts: %.0f", conflicts)
	}
	start := histogramOf(w.met.StartLatency.WithLabelValues(benchQueue).(prometheus.Metric))
	note("manager start latency (ready → handler start): %s", start)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func counterValue(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// hist is a read-out of a Prometheus histogram.
type hist struct {
	count   uint64
	sum     float64
	bounds  []float64
	buckets []uint64 // cumulative
}

func histogramOf(h prometheus.Metric) hist {
	var m dto.Metric
	if err := h.Write(&m); err != nil || m.Histogram == nil {
		return hist{}
	}
	out := hist{count: m.Histogram.GetSampleCount(), sum: m.Histogram.GetSampleSum()}
	for _, b := range m.Histogram.Bucket {
		out.bounds = append(out.bounds, b.GetUpperBound())
		out.buckets = append(out.buckets, b.GetCumulativeCount())
	}
	return out
}

// quantile interpolates linearly inside the bucket holding q (seconds); past
// the last bucket it returns that bucket's bound and false.
func (h hist) quantile(q float64) (float64, bool) {
	if h.count == 0 {
		return 0, true
	}
	rank := q * float64(h.count)
	lower, prev := 0.0, uint64(0)
	for i, c := range h.buckets {
		if float64(c) >= rank {
			in := float64(c - prev)
			if in == 0 {
				return h.bounds[i], true
			}
			return lower + (h.bounds[i]-lower)*(rank-float64(prev))/in, true
		}
		lower, prev = h.bounds[i], c
	}
	return lower, false
}

// quantileMS renders a quantile in milliseconds, "≈x" or ">x".
func (h hist) quantileMS(q float64) string {
	v, ok := h.quantile(q)
	if !ok {
		return fmt.Sprintf(">%.0fms", 1000*v)
	}
	return fmt.Sprintf("≈%.2fms", 1000*v)
}

func (h hist) String() string {
	if h.count == 0 {
		return "none"
	}
	return fmt.Sprintf("n=%d mean=%.2fms p50%s p99%s total=%.1fs", h.count,
		1000*h.sum/float64(h.count), h.quantileMS(0.5), h.quantileMS(0.99), h.sum)
}
