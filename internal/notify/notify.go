// Package notify owns the process's one LISTEN connection. It fans
// notifications out in-process to subscribers over buffered channels, never
// blocks on a slow subscriber (a full buffer drops the notification and
// marks the subscription as having missed some, so the subscriber resyncs
// from the database), and reconnects with backoff when the connection drops.
package notify

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Channels the product listens on.
const (
	ChannelJobs   = "dl_jobs"     // payload: a queue whose jobs became ready
	ChannelCancel = "dl_cancel"   // payload: a job id whose cancellation was requested
	ChannelDone   = "dl_job_done" // payload: comma-separated ids of jobs that reached a final status
)

// Notification is one message received on a channel. A Notification with
// Resync set carries no payload: it says that messages may have been missed
// (the connection was re-established) and subscribers should re-read state.
type Notification struct {
	Channel string
	Payload string
	Resync  bool
}

// Subscription receives the notifications of one channel.
type Subscription struct {
	C       <-chan Notification
	c       chan Notification
	channel string
	missed  atomic.Bool
	l       *Listener
}

// Missed reports, and clears, whether notifications were dropped because
// the subscriber's buffer was full.
func (s *Subscription) Missed() bool { return s.missed.Swap(false) }

// Close unsubscribes.
func (s *Subscription) Close() {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	delete(s.l.subs, s)
}

// State is a snapshot of the listener for /status and metrics.
type State struct {
	Connected  bool      `json:"connected"`
	Reconnects int64     `json:"reconnects"`
	Since      time.Time `json:"since"`
	LastError  string    `json:"last_error,omitempty"`
}

// Listener is the one LISTEN connection of a process.
type Listener struct {
	dsn      string
	channels []string
	log      *slog.Logger

	mu    sync.Mutex
	subs  map[*Subscription]struct{}
	state State
}

// New returns a listener for the given channels; Run connects it.
func New(dsn string, log *slog.Logger, channels ...string) *Listener {
	return &Listener{dsn: dsn, channels: channels, log: log, subs: map[*Subscription]struct{}{}}
}

// Subscribe returns a subscription to channel with a buffer of size buf.
func (l *Listener) Subscribe(channel string, buf int) *Subscription {
	c := make(chan Notification, buf)
	s := &Subscription{C: c, c: c, channel: channel, l: l}
	l.mu.Lock()
	l.subs[s] = struct{}{}
	l.mu.Unlock()
	return s
}

// State returns the listener's current state.
func (l *Listener) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// Run listens until ctx ends, reconnecting with capped exponential backoff.
// It returns nil when ctx ends.
func (l *Listener) Run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		conn, err := l.connect(ctx)
		if err == nil {
			if !first {
				l.mu.Lock()
				l.state.Reconnects++
				l.mu.Unlock()
				l.log.Info("listener reconnected")
			}
			first = false
			backoff = 100 * time.Millisecond
			l.setState(true, nil)
			l.broadcastResync()
			err = l.receive(ctx, conn)
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = conn.Close(closeCtx)
			cancel()
		}
		if ctx.Err() != nil {
			break
		}
		l.setState(false, err)
		l.log.Warn("listener connection lost; workers poll until it is back", "error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
	l.setState(false, nil)
	return nil
}

func (l *Listener) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(l.dsn)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = "dataloader-listener"
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, err
	}
	for _, ch := range l.channels {
		if _, err := conn.Exec(cctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			_ = conn.Close(cctx)
			return nil, err
		}
	}
	return conn, nil
}

func (l *Listener) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		l.publish(Notification{Channel: n.Channel, Payload: n.Payload})
	}
}

func (l *Listener) publish(n Notification) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for s := range l.subs {
		if s.channel != n.Channel && !n.Resync {
			continue
		}
		select {
		case s.c <- n:
		default:
			s.missed.Store(true)
		}
	}
}

func (l *Listener) broadcastResync() { l.publish(Notification{Resync: true}) }

func (l *Listener) setState(connected bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state.Connected != connected {
		l.state.Since = time.Now()
	}
	l.state.Connected = connected
	if err != nil && !errors.Is(err, context.Canceled) {
		l.state.LastError = err.Error()
	}
}
