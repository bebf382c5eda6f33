// Package journal follows the dl_job_events journal in event_id order for
// the export stream (and anyone else who wants every event exactly once).
//
// One Tailer per process reads new events and keeps the most recent ones in
// a ring. Readers pull from the ring by their own cursor; a reader that fell
// behind the ring reads the journal itself until it catches up. Nothing is
// buffered per reader, so a slow client costs no memory and loses nothing.
//
// Event ids come from a sequence, so a transaction can commit id 105 before
// another commits 103. The tailer therefore only advances over ids it has
// seen: at a gap it waits, because the missing id may belong to a
// transaction still in flight. A gap older than GapTimeout is taken to be a
// rolled-back insert and passed. (A transaction that holds an event for
// longer than that — a library user's long transaction — has its event
// delivered only to readers that start from before it.)
package journal

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/notify"
	"github.com/dataloader/dataloader/internal/store"
)

// Defaults of a Tailer.
const (
	DefaultRingSize   = 20000
	DefaultPoll       = 100 * time.Millisecond
	DefaultGapTimeout = 10 * time.Second
	readBatch         = 2000
)

// Tailer follows the journal. Its zero value is not usable; see New.
type Tailer struct {
	store      *store.Store
	log        *slog.Logger
	poll       time.Duration
	gapTimeout time.Duration

	wake chan struct{}

	mu      sync.Mutex
	ring    []job.Event // ring[i] holds the event with id ≡ … (kept in id order)
	head    int64       // every id ≤ head is settled: delivered or known missing
	started bool
	changed chan struct{} // closed and replaced whenever head moves
	gapAt   time.Time     // when the current gap was first seen
	gapID   int64
}

// New returns a tailer over st; Run starts it.
func New(st *store.Store, log *slog.Logger) *Tailer {
	return &Tailer{store: st, log: log, poll: DefaultPoll, gapTimeout: DefaultGapTimeout,
		wake: make(chan struct{}, 1), changed: make(chan struct{})}
}

// Poke asks for a read now (e.g. on a notification that jobs changed).
func (t *Tailer) Poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// WakeOn pokes the tailer whenever one of subs receives a notification
// (e.g. jobs queued or finished), so events leave within milliseconds rather
// than at the next poll. It returns when ctx ends.
func (t *Tailer) WakeOn(ctx context.Context, subs ...*notify.Subscription) {
	cases := make(chan struct{}, 1)
	for _, s := range subs {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-s.C:
					select {
					case cases <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-cases:
			t.Poke()
		}
	}
}

// Head returns the id up to which the journal is settled.
func (t *Tailer) Head() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.head
}

// Run follows the journal until ctx ends. It starts at the journal's end:
// readers that want older events get them from the journal itself.
func (t *Tailer) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		if err := t.start(ctx); err == nil {
			break
		} else if ctx.Err() == nil {
			t.log.Warn("journal tailer cannot start; retrying", "error", err)
		}
		sleep(ctx, time.Second)
	}
	timer := time.NewTimer(t.poll)
	defer timer.Stop()
	for ctx.Err() == nil {
		more, err := t.step(ctx)
		if err != nil && ctx.Err() == nil {
			t.log.Warn("journal read failed; retrying", "error", err)
			sleep(ctx, time.Second)
			continue
		}
		if more {
			continue
		}
		timer.Reset(t.poll)
		select {
		case <-ctx.Done():
		case <-timer.C:
		case <-t.wake:
			// Let the writer's batch land before reading: fewer, fuller reads.
			sleep(ctx, 5*time.Millisecond)
		}
	}
	return nil
}

func (t *Tailer) start(ctx context.Context) error {
	id, err := t.store.LastEventID(ctx)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.head, t.started = id, true
	t.mu.Unlock()
	return nil
}

// step reads what follows head and advances over the contiguous part. It
// reports whether a full batch was read (more may be waiting).
func (t *Tailer) step(ctx context.Context) (bool, error) {
	head := t.Head()
	evs, err := t.store.EventsRange(ctx, head, 1<<62, readBatch)
	if err != nil {
		return false, err
	}
	var take []job.Event
	next := head + 1
	for _, ev := range evs {
		if ev.ID != next {
			if !t.gapExpired(next) {
				break
			}
			t.log.Debug("journal gap passed", "from", next, "to", ev.ID-1)
		}
		take = append(take, ev)
		next = ev.ID + 1
	}
	if len(take) > 0 {
		t.advance(take)
	}
	return len(evs) == readBatch && len(take) == len(evs), nil
}

// gapExpired reports whether the gap starting at id has lasted GapTimeout.
func (t *Tailer) gapExpired(id int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gapID != id {
		t.gapID, t.gapAt = id, time.Now()
		return false
	}
	return time.Since(t.gapAt) >= t.gapTimeout
}

func (t *Tailer) advance(evs []job.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ring = append(t.ring, evs...)
	if over := len(t.ring) - DefaultRingSize; over > 0 {
		t.ring = append(t.ring[:0:0], t.ring[over:]...)
	}
	t.head = evs[len(evs)-1].ID
	close(t.changed)
	t.changed = make(chan struct{})
}

// Filter selects events for a reader; empty fields match everything.
type Filter struct {
	Queue string
	JobID string
}

func (f Filter) match(ev job.Event) bool {
	return (f.Queue == "" || ev.Queue == f.Queue) && (f.JobID == "" || ev.JobID.String() == f.JobID)
}

// Next returns the events after cursor that match f, in id order, waiting
// until there is at least one or ctx ends. The returned cursor is where to
// continue; it can move even when no event matched.
func (t *Tailer) Next(ctx context.Context, cursor int64, f Filter, max int) ([]job.Event, int64, error) {
	for {
		t.mu.Lock()
		head, changed := t.head, t.changed
		var out []job.Event
		fromRing := len(t.ring) > 0 && t.ring[0].ID <= cursor+1 && t.started
		if fromRing {
			for _, ev := range t.ring {
				if ev.ID <= cursor {
					continue
				}
				cursor = ev.ID
				if f.match(ev) {
					out = append(out, ev)
					if len(out) == max {
						break
					}
				}
			}
		}
		t.mu.Unlock()
		if !fromRing && cursor < head {
			// Behind the ring: read the settled part of the journal directly.
			evs, err := t.store.EventsRange(ctx, cursor, head, readBatch)
			if err != nil {
				return nil, cursor, err
			}
			for _, ev := range evs {
				cursor = ev.ID
				if f.match(ev) {
					out = append(out, ev)
					if len(out) == max {
						break
					}
				}
			}
			if len(evs) == 0 {
				cursor = head
			}
		}
		if len(out) > 0 {
			return out, cursor, nil
		}
		if cursor < head {
			continue
		}
		select {
		case <-ctx.Done():
			return nil, cursor, ctx.Err()
		case <-changed:
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
