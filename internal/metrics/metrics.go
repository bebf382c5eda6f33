// Package metrics defines dataloader's Prometheus metrics. One Metrics value
// is built per process (tests build their own on a fresh registry) and passed
// to the parts that record into it.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics holds every collector the product records into.
type Metrics struct {
	Registry *prometheus.Registry

	Claimed        *prometheus.CounterVec   // queue
	Completed      *prometheus.CounterVec   // queue, outcome
	Retries        *prometheus.CounterVec   // queue
	Reaped         *prometheus.CounterVec   // status: queued|lost
	LockConflicts  *prometheus.CounterVec   // queue
	HandedBack     prometheus.Counter       // jobs handed back on shutdown
	Shutdowns      *prometheus.CounterVec   // kind: graceful|forced
	ClaimSeconds   *prometheus.HistogramVec // queue
	ProcessSeconds *prometheus.HistogramVec // queue, task
	FinishSeconds  prometheus.Histogram
	ReaperSeconds  prometheus.Histogram
	StartLatency   *prometheus.HistogramVec // queue: enqueue (or available_at) → handler start
	Running        *prometheus.GaugeVec     // queue
}

// New registers the product's collectors on a new registry, with the Go and
// process collectors.
func New() *Metrics {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	fast := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
	m := &Metrics{
		Registry: r,
		Claimed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dataloader_jobs_claimed_total",
			Help: "Jobs claimed by this process's workers."}, []string{"queue"}),
		Completed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dataloader_jobs_completed_total",
			Help: "Attempts finished, by outcome (succeeded, retry, failed, canceled)."}, []string{"queue", "outcome"}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dataloader_jobs_retried_total",
			Help: "Failed attempts put back to queued with backoff."}, []string{"queue"}),
		Reaped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dataloader_jobs_reaped_total",
			Help: "Running jobs whose lease expired, by the status they were given (queued or lost)."}, []string{"status"}),
		LockConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dataloader_lock_conflicts_total",
			Help: "Claimed jobs handed back because their lock_key's advisory lock was held."}, []string{"queue"}),
		HandedBack: prometheus.NewCounter(prometheus.CounterOpts{Name: "dataloader_jobs_handed_back_total",
			Help: "Running jobs handed back to the queue at the end of a shutdown grace period."}),
		Shutdowns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dataloader_shutdowns_total",
			Help: "Worker shutdowns: graceful (every job finished) or forced (some handed back)."}, []string{"kind"}),
		ClaimSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dataloader_claim_seconds",
			Help: "Duration of the claim statement.", Buckets: fast}, []string{"queue"}),
		ProcessSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dataloader_job_process_seconds",
			Help: "Handler run time.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 12)}, []string{"queue", "task"}),
		FinishSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dataloader_finish_seconds",
			Help: "Duration of one batched finish statement.", Buckets: fast}),
		ReaperSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dataloader_reaper_seconds",
			Help: "Duration of one reaper pass.", Buckets: fast}),
		StartLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dataloader_job_start_latency_seconds",
			Help: "From a job being ready (created or available_at) to its handler starting.", Buckets: fast}, []string{"queue"}),
		Running: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dataloader_jobs_running",
			Help: "Jobs running in this process."}, []string{"queue"}),
	}
	r.MustRegister(m.Claimed, m.Completed, m.Retries, m.Reaped, m.LockConflicts, m.HandedBack, m.Shutdowns,
		m.ClaimSeconds, m.ProcessSeconds, m.FinishSeconds, m.ReaperSeconds, m.StartLatency, m.Running)
	return m
}
