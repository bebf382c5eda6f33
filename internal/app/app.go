// Package app is dataloader's composition root: it builds the database
// connection (starting the embedded cluster when no DSN is configured),
// applies migrations, wires the notifier, workers, maintenance and HTTP
// server, runs them under one lifecycle and shuts them down in order.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/config"
	"github.com/dataloader/dataloader/internal/journal"
	"github.com/dataloader/dataloader/internal/maintenance"
	"github.com/dataloader/dataloader/internal/metrics"
	"github.com/dataloader/dataloader/internal/notify"
	"github.com/dataloader/dataloader/internal/pgcluster"
	"github.com/dataloader/dataloader/internal/pipeline"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/internal/web"
	"github.com/dataloader/dataloader/internal/worker"
)

// Version is the product version, set at build time with -ldflags.
var Version = "dev"

// Options adjust an App for tests and embedding.
type Options struct {
	// Listener, when set, is served instead of listening on cfg.ListenAddr
	// (tests pass 127.0.0.1:0).
	Listener net.Listener
	// Tasks, when set, registers extra task handlers beside the built-ins.
	Tasks func(*worker.Registry)
	// Stderr receives the generated first-admin credentials (default
	// os.Stderr).
	Stderr io.Writer
}

// App is one dataloader process.
type App struct {
	cfg     config.Config
	log     *slog.Logger
	dsn     string
	cluster *pgcluster.Cluster
	store   *store.Store
	// workerPool serves the workers' and the reaper's statements (see
	// store.OpenWorkerPool).
	workerPool *pgxpool.Pool
	met        *metrics.Metrics
	listener   *notify.Listener
	workers    *worker.Manager
	web        *web.Server
	journal    *journal.Tailer
	ln         net.Listener
	pipes      pipelineParts // etl.load, http.deliver, alerts, retention, schedules (pipelines.go)
}

// New prepares a process: database (embedded when cfg has no DSN),
// migrations, and every component. Nothing runs until Run.
func New(ctx context.Context, cfg config.Config, log *slog.Logger, opts Options) (a *App, err error) {
	a = &App{cfg: cfg, log: log, dsn: cfg.DatabaseDSN}
	defer func() {
		if err != nil {
			a.close(context.WithoutCancel(ctx))
		}
	}()
	if a.dsn, a.cluster, err = database(ctx, cfg, log); err != nil {
		return nil, err
	}
	if err = store.Migrate(ctx, a.dsn, log); err != nil {
		return nil, err
	}
	pool, err := store.Open(ctx, a.dsn, 0)
	if err != nil {
		return nil, err
	}
	a.store = store.New(pool)
	if a.workerPool, err = store.OpenWorkerPool(ctx, a.dsn, 8); err != nil {
		return nil, err
	}
	workStore := store.New(a.workerPool)
	authCfg, err := a.authConfig(ctx, opts)
	if err != nil {
		return nil, err
	}
	a.met = metrics.New()
	a.listener = notify.New(a.dsn, log, notify.ChannelJobs, notify.ChannelCancel, notify.ChannelDone)
	a.met.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dataloader_listener_connected",
			Help: "1 while the LISTEN connection is up, 0 while it reconnects (workers poll meanwhile)."},
			func() float64 { return boolFloat(a.listener.State().Connected) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "dataloader_listener_reconnects_total",
			Help: "Times the LISTEN connection was re-established."},
			func() float64 { return float64(a.listener.State().Reconnects) }))

	reg := worker.NewRegistry()
	pipeline.Register(reg)
	if err = a.setupPipelines(reg); err != nil {
		return nil, err
	}
	if opts.Tasks != nil {
		opts.Tasks(reg)
	}
	queues := make([]worker.QueueConfig, len(cfg.Workers))
	for i, w := range cfg.Workers {
		queues[i] = worker.QueueConfig{Name: w.Queue, Concurrency: w.Concurrency}
	}
	queues = a.withAlertQueue(queues)
	a.workers = worker.New(worker.Config{WorkerID: cfg.WorkerID, Queues: queues, Heartbeat: cfg.Heartbeat,
		ClaimBackoff: cfg.ClaimBackoff, PollInterval: cfg.PollInterval, ShutdownGrace: cfg.ShutdownGrace,
		Version: Version}, a.dsn, workStore, a.listener, reg, log, a.met)
	a.journal = journal.New(a.store, log)
	a.web = web.New(web.Deps{Store: a.store, Listener: a.listener, Workers: a.workers, Journal: a.journal, Metrics: a.met, Log: log,
		DSN: a.dsn, Version: Version, MaxBodyBytes: cfg.MaxBodyBytes, DefaultLeaseTTL: int(cfg.DefaultLeaseTTL.Seconds()),
		Auth: authCfg})

	a.ln = opts.Listener
	if a.ln == nil {
		if a.ln, err = net.Listen("tcp", cfg.ListenAddr); err != nil {
			return nil, fmt.Errorf("DL_LISTEN_ADDR: listen on %s: %w", cfg.ListenAddr, err)
		}
	}
	return a, nil
}

// Addr is the address the HTTP server listens on.
func (a *App) Addr() net.Addr { return a.ln.Addr() }

// DSN is the database the process uses (the embedded one's when no DSN was
// configured).
func (a *App) DSN() string { return a.dsn }

// Run serves until ctx ends, then shuts down in order: readiness off, stop
// claiming, grace for running jobs, hand back the rest, record outcomes,
// stop HTTP, listener and maintenance, close the pool, stop the embedded
// database. It returns nil after a clean shutdown.
func (a *App) Run(ctx context.Context) error {
	bg := context.WithoutCancel(ctx)
	svcCtx, stopServices := context.WithCancel(bg)
	defer stopServices()
	srv := &http.Server{Handler: a.web, ReadHeaderTimeout: 10 * time.Second}

	g, gctx := errgroup.WithContext(svcCtx)
	g.Go(func() error { return a.listener.Run(gctx) })
	g.Go(func() error { return a.journal.Run(gctx) })
	g.Go(func() error { return a.pokeJournal(gctx) })
	reaper := &maintenance.Reaper{Store: store.New(a.workerPool), Period: a.cfg.ReaperPeriod, Name: a.workers.WorkerID(), Log: a.log, Met: a.met}
	g.Go(func() error { return reaper.Run(gctx) })
	a.runPipelines(gctx, g)
	g.Go(func() error {
		if err := srv.Serve(a.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server: %w", err)
		}
		return nil
	})
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	g.Go(func() error {
		// A failing service stops the workers too, so the process exits.
		// Readiness turns off first, before the workers start draining.
		select {
		case <-gctx.Done():
		case <-workCtx.Done():
		}
		a.web.SetReady(false)
		stopWork()
		return nil
	})
	a.log.Info("dataloader running", "addr", a.ln.Addr().String(), "version", Version)

	werr := a.workers.Run(workCtx)
	shutCtx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		a.log.Warn("http shutdown", "error", err)
	}
	stopServices()
	gerr := g.Wait()
	a.close(bg)
	return errors.Join(werr, gerr)
}

// close releases what New acquired.
func (a *App) close(ctx context.Context) {
	if a.workerPool != nil {
		a.workerPool.Close()
	}
	if a.store != nil {
		a.store.Pool().Close()
	}
	stopCluster(ctx, a.cluster, a.log)
}

// Migrate applies migrations to the configured database (starting the
// embedded one when no DSN is set) and returns.
func Migrate(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	dsn, cluster, err := database(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer stopCluster(ctx, cluster, log)
	return store.Migrate(ctx, dsn, log)
}

// pokeJournal wakes the journal tailer whenever jobs change, so exported
// events leave within milliseconds rather than at the next poll.
func (a *App) pokeJournal(ctx context.Context) error {
	jobs := a.listener.Subscribe(notify.ChannelJobs, 16)
	defer jobs.Close()
	done := a.listener.Subscribe(notify.ChannelDone, 16)
	defer done.Close()
	a.journal.WakeOn(ctx, jobs, done)
	return nil
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// authConfig resolves the session keys (DL_SESSION_KEYS, else the key kept
// in <DL_DATA_DIR>/session.key) and makes sure an admin exists.
func (a *App) authConfig(ctx context.Context, opts Options) (web.AuthConfig, error) {
	cfg := a.cfg
	keys := cfg.SessionKeys
	if len(keys) == 0 {
		key, created, err := auth.LoadOrCreateKeyFile(cfg.SessionKeyFile())
		if err != nil {
			return web.AuthConfig{}, fmt.Errorf("DL_SESSION_KEYS is not set and %w", err)
		}
		if created {
			a.log.Info("DL_SESSION_KEYS not set: generated a session key and saved it; set DL_SESSION_KEYS on every replica to share sessions",
				"path", cfg.SessionKeyFile())
		}
		keys = [][]byte{key}
	}
	stderr := opts.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	if err := auth.Bootstrap(ctx, a.store, cfg.AdminUser, cfg.AdminPassword, stderr, a.log); err != nil {
		return web.AuthConfig{}, err
	}
	return web.AuthConfig{SessionKeys: keys, CookieSecure: cfg.CookieSecure, SessionTTL: cfg.SessionTTL,
		TrustedProxies: cfg.TrustedProxies}, nil
}

// Accounts runs the `user` and `token` subcommands (args start with "user"
// or "token") against the configured database, starting the embedded one
// when no DSN is set (or sharing it with a running server).
func Accounts(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, cio auth.CommandIO) error {
	dsn, cluster, err := database(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer stopCluster(ctx, cluster, log)
	if err := store.Migrate(ctx, dsn, log); err != nil {
		return err
	}
	pool, err := store.Open(ctx, dsn, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	cio.Password = cfg.AdminPassword
	return auth.Command(ctx, store.New(pool), args, cio)
}

// database returns the configured DSN, or starts the embedded cluster (or
// joins one already running in the data directory) when none is set.
func database(ctx context.Context, cfg config.Config, log *slog.Logger) (string, *pgcluster.Cluster, error) {
	if cfg.DatabaseDSN != "" {
		return cfg.DatabaseDSN, nil, nil
	}
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: cfg.EmbeddedClusterDir(), Logger: log, Database: "dataloader"})
	if err != nil {
		return "", nil, fmt.Errorf("start embedded database (set DL_DB_DSN to use your own): %w", err)
	}
	log.Info("embedded database ready", "data_dir", cfg.EmbeddedClusterDir())
	return cluster.DSN("dataloader"), cluster, nil
}

// stopCluster stops the embedded cluster, if this process started one.
func stopCluster(ctx context.Context, c *pgcluster.Cluster, log *slog.Logger) {
	if c == nil {
		return
	}
	if err := c.Stop(context.WithoutCancel(ctx)); err != nil {
		log.Warn("stopping embedded database", "error", err)
	}
}
