package app

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/dataloader/dataloader/internal/maintenance"
	"github.com/dataloader/dataloader/internal/pipeline"
	"github.com/dataloader/dataloader/internal/schedule"
	"github.com/dataloader/dataloader/internal/worker"
)

// pipelineParts are the built-in pipelines' pieces the process runs beside
// the workers: settings, retention, final-failure alerts and schedules.
type pipelineParts struct {
	settings pipeline.Settings
	alerter  *maintenance.Alerter
	retainer *maintenance.Retention
	sched    *schedule.Scheduler
}

// setupPipelines reads the pipelines' settings, registers etl.load and
// http.deliver, and builds retention, the alerter and the scheduler.
//
// config.Load read the variables (DL_RETENTION_HOURS, DL_ALERT_WEBHOOK_URL,
// DL_ALERT_QUEUE, DL_SCHEDULES_JSON, DL_ETL_TARGETS_JSON, DL_ETL_FILE_DIR);
// pipeline.LoadSettings validates them, naming the variable at fault.
func (a *App) setupPipelines(reg *worker.Registry) error {
	ps, err := pipeline.LoadSettings(a.cfg.PipelineVar)
	if err != nil {
		return err
	}
	pipeline.RegisterBuiltins(reg, pipeline.Deps{DSN: a.dsn, Targets: ps.ETLTargets, FileDir: ps.ETLFileDir, Log: a.log})
	ttl := int(a.cfg.DefaultLeaseTTL.Seconds())
	a.pipes = pipelineParts{
		settings: ps,
		alerter: &maintenance.Alerter{Store: a.store, WebhookURL: ps.AlertWebhookURL, Queue: ps.AlertQueue,
			DefaultLeaseTTL: ttl, Log: a.log, Failed: maintenance.NewFailedCounter(a.met.Registry)},
		retainer: &maintenance.Retention{Store: a.store, Age: ps.RetentionAge, Log: a.log,
			Deleted: maintenance.NewRetentionCounter(a.met.Registry)},
		sched: &schedule.Scheduler{Store: a.store, Specs: ps.Schedules, DefaultLeaseTTL: ttl, Log: a.log},
	}
	a.log.Info("pipelines configured", "settings", ps)
	return nil
}

// withAlertQueue adds the alert deliveries' queue to a replica that works
// queues but not that one, so webhooks go out without extra configuration.
func (a *App) withAlertQueue(queues []worker.QueueConfig) []worker.QueueConfig {
	if a.pipes.settings.AlertWebhookURL == "" || len(queues) == 0 {
		return queues
	}
	for _, q := range queues {
		if q.Name == a.pipes.settings.AlertQueue {
			return queues
		}
	}
	return append(queues, worker.QueueConfig{Name: a.pipes.settings.AlertQueue, Concurrency: 2})
}

// runPipelines starts retention, the alerter and the scheduler in g.
func (a *App) runPipelines(ctx context.Context, g *errgroup.Group) {
	g.Go(func() error { return a.pipes.retainer.Run(ctx) })
	g.Go(func() error { return a.pipes.alerter.Run(ctx) })
	g.Go(func() error { return a.pipes.sched.Run(ctx) })
}
