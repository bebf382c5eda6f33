// Command web is the dataloader process: JSON API, dashboard, workers and
// maintenance in one binary.
//
//	web            run the product (default)
//	web migrate    apply database migrations and exit
//	web version    print the version
//	web user add NAME [--role viewer|operator|admin]   add a dashboard user;
//	               the password comes from DL_ADMIN_PASSWORD, else stdin
//	web user list
//	web token add NAME [--role viewer|operator|admin]  create an API token;
//	               its secret is printed once
//	web token list
//	web token revoke ID
//
// Configuration comes from the environment (see .env.example).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/dataloader/dataloader/internal/app"
	"github.com/dataloader/dataloader/internal/auth"
	"github.com/dataloader/dataloader/internal/config"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	if cmd == "version" {
		fmt.Println(app.Version)
		return 0
	}
	switch cmd {
	case "serve", "migrate", "user", "token":
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q; use serve, migrate, user, token or version\n", cmd)
		return 2
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dataloader: invalid configuration:\n%v\n", err)
		return 2
	}
	if cmd == "user" || cmd == "token" {
		cfg.LogLevel = max(cfg.LogLevel, slog.LevelWarn) // keep the terminal for the answer
	}
	log := newLogger(cfg)

	ctx, stop := signalContext(log)
	defer stop()
	switch cmd {
	case "migrate":
		err = app.Migrate(ctx, cfg, log)
	case "user", "token":
		err = app.Accounts(ctx, cfg, log, args, auth.CommandIO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
		if errors.Is(err, auth.ErrUsage) {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "dataloader %s: %v\n", cmd, err)
			return 1
		}
		return 0
	default:
		err = serve(ctx, cfg, log)
	}
	if err != nil {
		log.Error("dataloader stopped with an error", "error", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	a, err := app.New(ctx, cfg, log, app.Options{})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// signalContext is cancelled by the first SIGTERM or SIGINT. Later signals
// are logged and ignored: the shutdown already under way finishes in order.
func signalContext(log *slog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		n := 0
		for sig := range ch {
			n++
			if n == 1 {
				log.Info("shutdown requested", "signal", sig.String())
				cancel()
				continue
			}
			log.Warn("shutdown already under way; signal ignored", "signal", sig.String())
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

func newLogger(cfg config.Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == config.LogFormatText {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}
