package chaos_test

import (
	"context"
	"io"
	"log/slog"
	"syscall"
	"testing"

	"github.com/dataloader/dataloader/internal/store"
)

var syscallTERM = syscall.SIGTERM

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func migrate(t *testing.T, dsn string) {
	t.Helper()
	if err := store.Migrate(context.Background(), dsn, quietLogger()); err != nil {
		t.Fatal(err)
	}
}
