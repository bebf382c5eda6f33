package notify_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataloader/dataloader/internal/notify"
	"github.com/dataloader/dataloader/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestListenerReconnectsAfterItsConnectionIsKilledAndDeliversAgain(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	l := notify.New(dsn, slog.New(slog.NewTextHandler(io.Discard, nil)), notify.ChannelJobs)
	sub := l.Subscribe(notify.ChannelJobs, 16)
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()

	waitNote := func(payload string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			if _, err := pool.Exec(ctx, `SELECT pg_notify('dl_jobs', $1)`, payload); err != nil {
				t.Fatal(err)
			}
			select {
			case n := <-sub.C:
				if n.Payload == payload {
					return
				}
			case <-time.After(100 * time.Millisecond):
			case <-deadline:
				t.Fatalf("notification %q never arrived (state %+v)", payload, l.State())
			}
		}
	}
	waitNote("before")
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'dataloader-listener' AND datname = current_database()`); err != nil {
		t.Fatal(err)
	}
	// The backend dies asynchronously: wait for the listener to notice and
	// come back before checking delivery.
	deadline := time.Now().Add(10 * time.Second)
	for st := l.State(); !st.Connected || st.Reconnects < 1; st = l.State() {
		if time.Now().After(deadline) {
			t.Fatalf("got state %+v, want connected again after a reconnect", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitNote("after")
	if st := l.State(); st.LastError == "" {
		t.Errorf("got state %+v, want the connection error recorded", st)
	}
	cancel()
	<-done
}

func TestSlowSubscriberIsMarkedMissedInsteadOfBlocking(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := notify.New(dsn, slog.New(slog.NewTextHandler(io.Discard, nil)), notify.ChannelJobs)
	slow := l.Subscribe(notify.ChannelJobs, 1)
	fast := l.Subscribe(notify.ChannelJobs, 64)
	go func() { _ = l.Run(ctx) }()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !l.State().Connected && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	<-fast.C // the resync on connect
	for i := 0; i < 5; i++ {
		if _, err := pool.Exec(ctx, `SELECT pg_notify('dl_jobs', $1)`, string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for got < 5 {
		select {
		case <-fast.C:
			got++
		case <-time.After(5 * time.Second):
			t.Fatalf("the fast subscriber got %d of 5: a slow one blocked the fan-out", got)
		}
	}
	if !slow.Missed() {
		t.Error("the slow subscriber's overflow was not recorded")
	}
}
