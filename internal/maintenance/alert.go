package maintenance

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/pipeline"
	"github.com/dataloader/dataloader/internal/store"
)

// AlertProducer is the producer of alert deliveries. A failing alert
// delivery is logged and counted like any job, but raises no webhook of its
// own (no alert loops).
const AlertProducer = "dataloader.alert"

// Alert defaults.
const (
	DefaultAlertQueue  = "alerts"
	DefaultAlertPeriod = time.Second
	alertBatch         = 100
	alertMaxAttempts   = 10
)

// Alerter reports jobs that failed for good (status failed or lost). The
// database records each final failure in the dl_alerts outbox in the very
// transaction that ends the job (a trigger, whoever ends it: finisher,
// reaper or an operator's SQL). Every replica runs an Alerter; a batch is
// taken with SKIP LOCKED and, in the same transaction, each alert's webhook
// delivery is enqueued as an http.deliver job, so every final failure gives
// exactly one log line, one count and one delivery, which survives restarts
// and retries like any job.
type Alerter struct {
	Store *store.Store
	// WebhookURL receives a JSON POST per final failure
	// (DL_ALERT_WEBHOOK_URL); empty: log and metric only.
	WebhookURL string
	// Queue is the queue of the webhook deliveries (some replica must work
	// it); default "alerts".
	Queue           string
	Period          time.Duration // between outbox polls; default 1 s
	DefaultLeaseTTL int           // seconds
	Log             *slog.Logger
	// Failed counts final failures by queue and task; nil records nothing.
	Failed *prometheus.CounterVec
}

// NewFailedCounter returns the dataloader_jobs_failed_final_total counter
// (labels queue, task) registered on reg.
func NewFailedCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dataloader_jobs_failed_final_total",
		Help: "Jobs that failed for good (failed or lost), counted once across replicas by the replica that alerted."},
		[]string{"queue", "task"})
	reg.MustRegister(c)
	return c
}

// AlertPayload is the JSON body of an alert webhook.
type AlertPayload struct {
	Type     string     `json:"type"` // "dataloader.job_failed"
	JobID    string     `json:"job_id"`
	Queue    string     `json:"queue"`
	Task     string     `json:"task"`
	Status   job.Status `json:"status"`
	Attempt  int        `json:"attempt"`
	Error    string     `json:"error,omitempty"`
	FailedAt time.Time  `json:"failed_at"`
}

// Run polls the outbox every Period until ctx ends.
func (a *Alerter) Run(ctx context.Context) error {
	period := a.Period
	if period <= 0 {
		period = DefaultAlertPeriod
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if _, err := a.RunOnce(ctx); err != nil && ctx.Err() == nil {
			a.Log.Error("alert pass failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RunOnce handles every alert waiting in the outbox and returns how many.
func (a *Alerter) RunOnce(ctx context.Context) (int, error) {
	total := 0
	for {
		alerts, err := a.Store.TakeAlerts(ctx, alertBatch, a.deliveries, a.DefaultLeaseTTL)
		if err != nil {
			return total, err
		}
		// Committed: now say it, once.
		for _, al := range alerts {
			a.Log.Error("job failed for good", "job_id", al.JobID, "queue", al.Queue, "task", al.Task,
				"status", al.Status, "attempt", al.Attempt, "error", al.Error, "webhook", a.webhookFor(al))
			if a.Failed != nil {
				a.Failed.WithLabelValues(al.Queue, al.Task).Inc()
			}
		}
		total += len(alerts)
		if len(alerts) < alertBatch {
			return total, nil
		}
	}
}

func (a *Alerter) webhookFor(al store.Alert) bool {
	return a.WebhookURL != "" && al.Producer != AlertProducer
}

// deliveries builds the webhook jobs of a batch of alerts.
func (a *Alerter) deliveries(alerts []store.Alert) []job.TriggerParams {
	queue := a.Queue
	if queue == "" {
		queue = DefaultAlertQueue
	}
	var out []job.TriggerParams
	for _, al := range alerts {
		if !a.webhookFor(al) {
			continue
		}
		payload, _ := json.Marshal(AlertPayload{Type: "dataloader.job_failed", JobID: al.JobID.String(), Queue: al.Queue,
			Task: al.Task, Status: al.Status, Attempt: al.Attempt, Error: al.Error, FailedAt: al.At})
		args, _ := json.Marshal(pipeline.DeliverArgs{URL: a.WebhookURL, Payload: payload,
			BackoffMS: 5000, MaxBackoffMS: int((10 * time.Minute).Milliseconds())})
		key := "alert:" + al.JobID.String() + ":" + strconv.Itoa(al.Attempt)
		producer := AlertProducer
		maxAttempts := alertMaxAttempts
		out = append(out, job.TriggerParams{Queue: queue, Task: pipeline.DeliverTask, Args: args,
			IdempotencyKey: &key, LockKey: "alert:" + al.JobID.String(), Producer: &producer, MaxAttempts: &maxAttempts})
	}
	return out
}
