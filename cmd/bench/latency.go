package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/internal/worker"
)

const latencyTask = "bench.latency"

// latencyArgs carries the enqueue time: taken just before Store.Trigger.
type latencyArgs struct {
	T int64 `json:"t"` // unix nanoseconds
}

// startTimes collects enqueue → handler start durations.
type startTimes struct {
	mu      sync.Mutex
	samples []time.Duration
	started chan struct{}
}

func (s *startTimes) handler(ctx context.Context, run job.Run) error {
	var a latencyArgs
	if err := json.Unmarshal(run.Job().Args, &a); err != nil {
		return job.Permanent(err)
	}
	d := time.Since(time.Unix(0, a.T))
	s.mu.Lock()
	s.samples = append(s.samples, d)
	s.mu.Unlock()
	select {
	case s.started <- struct{}{}:
	default:
	}
	return nil
}

func (s *startTimes) take() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.samples
	s.samples = nil
	return out
}

func (s *startTimes) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.samples)
}

// triggerLatency enqueues one latency job through the single-row Store.Trigger and
// returns how long the call took.
func triggerLatency(ctx context.Context, st *store.Store, key string) (time.Duration, error) {
	t0 := time.Now()
	args, _ := json.Marshal(latencyArgs{T: t0.UnixNano()})
	_, err := st.Trigger(ctx, job.TriggerParams{Queue: benchQueue, Task: latencyTask, Args: args, LockKey: key}, leaseTTL)
	return time.Since(t0), err
}

// runLatency measures enqueue → handler start, on an idle queue and under
// a steady trickle.
func runLatency(ctx context.Context, b *bench) error {
	dsn, err := b.database(ctx, "latency")
	if err != nil {
		return err
	}
	st, err := b.openWorker(ctx, dsn, b.o.pool)
	if err != nil {
		return err
	}
	defer st.Pool().Close()
	prod, err := b.open(ctx, dsn, 4)
	if err != nil {
		return err
	}
	defer prod.Pool().Close()
	lat := &startTimes{started: make(chan struct{}, 1)}
	w, err := b.startWorkers(ctx, dsn, st, b.o.concurrency, func(r *worker.Registry) {
		r.MustRegister(latencyTask, worker.Task{Handler: job.HandlerFunc(lat.handler)})
	})
	if err != nil {
		return err
	}
	defer w.close()
	note("enqueue time taken just before Store.Trigger (single-row insert, own pool); latency = handler start − that time")

	// Idle: one job at a time, the next once the previous handler started.
	// The first 10 warm up connections and prepared statements and are not counted.
	var trig []time.Duration
	misses := 0
	for i := -10; i < b.o.latIdle && ctx.Err() == nil; i++ {
		if i == 0 {
			lat.take()
			trig = trig[:0]
		}
		select { // drop a stale signal
		case <-lat.started:
		default:
		}
		d, err := triggerLatency(ctx, prod, fmt.Sprintf("idle-%d", i))
		if err != nil {
			return err
		}
		trig = append(trig, d)
		select {
		case <-lat.started:
		case <-time.After(5 * time.Second):
			misses++
		}
	}
	idle := lat.take()
	if misses > 0 {
		note("WARNING: %d idle jobs did not start within 5 s", misses)
	}
	note("idle: %d jobs one at a time; Store.Trigger itself: %s", len(idle), durSummary(trig))
	printLatency("latency_idle", idle)

	// Steady: a ticker enqueues at the given rate; each trigger in its own
	// goroutine so that a slow insert does not delay the next tick.
	interval := time.Second / time.Duration(b.o.latRate)
	var wg sync.WaitGroup
	var tmu sync.Mutex
	trig = trig[:0]
	tick := time.NewTicker(interval)
	sent := 0
	for end := time.Now().Add(b.o.latDuration); time.Now().Before(end) && ctx.Err() == nil; sent++ {
		<-tick.C
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			d, err := triggerLatency(ctx, prod, fmt.Sprintf("steady-%d", i))
			if err != nil {
				b.log.Error("trigger", "error", err)
				return
			}
			tmu.Lock()
			trig = append(trig, d)
			tmu.Unlock()
		}(sent)
	}
	tick.Stop()
	wg.Wait()
	for deadline := time.Now().Add(10 * time.Second); lat.count() < sent && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	steady := lat.take()
	if len(steady) < sent {
		note("WARNING: %d of %d steady jobs did not start within 10 s of the last enqueue", sent-len(steady), sent)
	}
	note("steady: %d jobs at %d/s for %s; Store.Trigger itself: %s", sent, b.o.latRate, b.o.latDuration, durSummary(trig))
	printLatency(fmt.Sprintf("latency_%drps", b.o.latRate), steady)
	if err := w.close(); err != nil {
		return err
	}
	w.summary()
	return nil
}

// printLatency prints p50, p90, p99 and max of samples in milliseconds.
func printLatency(prefix string, samples []time.Duration) {
	if len(samples) == 0 {
		note("%s: no samples", prefix)
		return
	}
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"max", 1}} {
		figure(prefix+"_"+q.name+"_ms", ms(percentile(samples, q.q)), "ms")
	}
}
