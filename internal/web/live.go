package web

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/notify"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/views"
)

// The live hub feeds the dashboard's server-sent event streams.
//
// A page subscribes to topics: "queues", "workers", "locks",
// "counts:<queue>", "job:<id>" (the job page) and "row:<id>" (one row of the
// jobs list). The hub works per topic, never per viewer: each tick it reads
// what its topics show, renders each region that changed ONCE per role
// variant (viewers get no action buttons), and hands the same bytes to every
// subscriber of the topic. So its cost grows with the number of distinct
// things watched, not with viewers, and not with the job rate.
//
// Where changes come from. Every tick (400 ms) the hub reads the watched
// jobs by primary key in one statement (list rows: every second), and the
// new journal events of the watched job pages in another (one index probe
// per page); a region is re-rendered only when its view model's
// fingerprint changed. This polls the watched set, not the table: it needs
// no column or trigger on the hot path, it cannot miss a change (the rows
// are the truth; events of the last few seconds are re-read, see
// eventSettle), and one query serves any number of viewers. The process's
// one LISTEN connection (notify.Listener) cuts the latency: a dl_job_done
// notification naming a watched job wakes the hub at once (at most every
// liveMinGap), so final states show in well under a second; notifications
// about unwatched jobs are ignored, so a high job rate does not make the
// hub tick more. No extra notification channel is needed. Aggregates
// (counts, workers, locks, the list's "newer jobs") refresh every second or
// two, the counts from the counts cache (see dashboard_counts.go).
//
// Delivery. Every message has an SSE id "<epoch>.<seq>"; each topic keeps
// its last ringSize messages. A reconnecting EventSource sends Last-Event-ID
// (a fresh page load passes the hub's cursor taken before it read the
// database, as ?since=), and the hub replays what the topic published since,
// or, when that is no longer in the ring (or the topic was not watched
// meanwhile, or the server restarted), resyncs it: the region's current
// rendering, a full timeline. A subscriber's queue is bounded: a slow client
// loses messages, never memory, and gets a resync of the topics it missed
// once it drains.
//
// Lifecycle. The hub's loop runs while someone is subscribed and stops by
// itself after the last one leaves. When the server stops being ready
// (shutdown began), the loop ends every stream with a "bye" event, so
// http.Server.Shutdown does not wait on them and browsers reconnect
// elsewhere.

// Hub pacing and bounds.
const (
	liveTick         = 400 * time.Millisecond // job pages: summaries and timelines
	liveMinGap       = 100 * time.Millisecond // earliest tick after the previous one, when woken
	rowsEvery        = time.Second            // list rows (a final status wakes the hub at once)
	aggregateEvery   = time.Second            // queues, counts, locks, list heads
	workersEvery     = 2 * time.Second
	waitFactsEvery   = 2 * time.Second // why a watched queued job waits
	ringSize         = 32
	subscriberQueue  = 64
	topicLinger      = time.Minute // idle topics are kept this long for reconnects
	maxStreamTopics  = 200
	maxWatchedJobs   = 5000
	livePingInterval = 15 * time.Second
)

// variant is the role-dependent rendering of a region.
type variant int

const (
	variantViewer variant = iota
	variantOperator
	nVariants
)

// allVariants marks a message that is the same for every role.
const allVariants variant = -1

// liveMsg is one SSE message, framed once and shared by every subscriber.
type liveMsg struct {
	seq     uint64
	event   string
	variant variant
	data    []byte
	wire    []byte
}

// topicKind is what a topic shows.
type topicKind int

const (
	kindQueues topicKind = iota
	kindWorkers
	kindLocks
	kindCounts
	kindJob
	kindRow
	kindHead // the newest job matching a list filter
)

// Topic names.
const (
	topicQueues  = "queues"
	topicWorkers = "workers"
	topicLocks   = "locks"
)

func topicCounts(queue string) string { return "counts:" + queue }
func topicJob(id uuid.UUID) string    { return "job:" + id.String() }
func topicRow(id uuid.UUID) string    { return "row:" + id.String() }

// topicHead names the newest job matching a list filter (without text).
func topicHead(f views.JobsFilter) string { return "head:" + f.Query() }

// parseTopic validates a topic name from a stream request.
func parseTopic(name string) (topicKind, uuid.UUID, string, bool) {
	switch name {
	case topicQueues:
		return kindQueues, uuid.Nil, "", true
	case topicWorkers:
		return kindWorkers, uuid.Nil, "", true
	case topicLocks:
		return kindLocks, uuid.Nil, "", true
	}
	kind, rest, _ := strings.Cut(name, ":")
	switch kind {
	case "counts":
		return kindCounts, uuid.Nil, rest, job.ValidText("queue", rest, job.MaxNameLen) == nil
	case "head":
		q, err := url.ParseQuery(rest)
		if err != nil {
			return 0, uuid.Nil, "", false
		}
		f := filterFromQuery(q.Get)
		return kindHead, uuid.Nil, rest, f.Text == "" && f.Query() == rest && storeFilter(f).Validate() == nil
	case "job", "row":
		id, err := uuid.Parse(rest)
		if err != nil || id.String() != rest {
			return 0, uuid.Nil, "", false
		}
		if kind == "job" {
			return kindJob, id, "", true
		}
		return kindRow, id, "", true
	}
	return 0, uuid.Nil, "", false
}

// topic is one watched thing. Fields above the line are guarded by hub.mu;
// those below are owned by the loop goroutine.
type topic struct {
	name  string
	kind  topicKind
	jobID uuid.UUID
	param string // counts: the queue; head: the filter's query

	subs      map[*liveSub]struct{}
	ring      []*liveMsg
	evicted   uint64 // seq of the newest message dropped from the ring
	resumed   uint64 // seq at which the hub (re)started watching the topic
	idleSince time.Time
	latest    map[string]*liveMsg // current rendering per event and variant, for resyncs
	needsFull bool                // (re)started: render and send everything
	fullFor   map[*liveSub]bool   // subscribers waiting for a full timeline

	// loop-owned
	fp      [nVariants + 1]uint64 // fingerprint of what was last rendered (index nVariants: shared regions)
	seeded  bool                  // job topics: recent holds the journal's tail
	recent  []job.Event           // job topics: the newest timelineSize events
	facts   *store.WaitFacts
	factsAt time.Time
}

// liveSub is one SSE stream.
type liveSub struct {
	variant variant
	topics  []*topic

	mu     sync.Mutex
	queue  []*liveMsg
	resync map[*topic]bool
	wake   chan struct{}
	bye    chan struct{}
	closed bool
}

// push queues m for the subscriber, or marks its topic for a resync when
// the queue is full (the subscriber is slow).
func (s *liveSub) push(t *topic, m *liveMsg) {
	s.mu.Lock()
	switch {
	case s.closed:
	case s.resync[t]:
		// a resync is pending for t: it supersedes this message
	case len(s.queue) >= subscriberQueue:
		if s.resync == nil {
			s.resync = map[*topic]bool{}
		}
		s.resync[t] = true
	default:
		s.queue = append(s.queue, m)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns the queued messages and the topics to resync.
func (s *liveSub) take() ([]*liveMsg, []*topic) {
	s.mu.Lock()
	defer s.mu.Unlock()
	msgs := s.queue
	s.queue = nil
	var ts []*topic
	for t := range s.resync {
		ts = append(ts, t)
	}
	s.resync = nil
	return msgs, ts
}

func (s *liveSub) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.bye)
	}
}

// hub is the dashboard's live fan-out.
type hub struct {
	d     *dashboard
	epoch string

	mu      sync.Mutex
	seq     uint64
	topics  map[string]*topic
	subs    map[*liveSub]struct{}
	running bool
	poked   map[string]bool
	done    map[uuid.UUID]bool // watched jobs a dl_job_done named since the last tick
	wakeC   chan struct{}
	wg      sync.WaitGroup // the loop
}

func newHub(d *dashboard) *hub {
	return &hub{d: d, epoch: strconv.FormatInt(time.Now().UnixNano(), 36), topics: map[string]*topic{},
		subs: map[*liveSub]struct{}{}, poked: map[string]bool{}, done: map[uuid.UUID]bool{},
		wakeC: make(chan struct{}, 1)}
}

// cursor is the id of the newest message: a page takes it before reading
// the database and passes it to its stream, which then replays what
// happened in between.
func (h *hub) cursor() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.epoch + "." + strconv.FormatUint(h.seq, 10)
}

// parseCursor reads "<epoch>.<seq>"; ok is false for another epoch.
func (h *hub) parseCursor(s string) (uint64, bool) {
	epoch, n, found := strings.Cut(s, ".")
	if !found || epoch != h.epoch {
		return 0, false
	}
	seq, err := strconv.ParseUint(n, 10, 64)
	return seq, err == nil
}

// liveURL is the stream URL of a page watching topics, resuming at since.
func liveURL(since string, topics ...string) string {
	v := url.Values{"t": topics}
	v.Set("since", since)
	return "/live?" + v.Encode()
}

// subscribe registers a stream on the named topics (validated by the
// caller) and queues what it missed since cursor: a replay from the rings,
// or resyncs.
func (h *hub) subscribe(names []string, v variant, cursor string) *liveSub {
	sub := &liveSub{variant: v, wake: make(chan struct{}, 1), bye: make(chan struct{})}
	since, sinceOK := h.parseCursor(cursor)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range names {
		t := h.topics[name]
		if t == nil {
			kind, id, param, _ := parseTopic(name)
			t = &topic{name: name, kind: kind, jobID: id, param: param, subs: map[*liveSub]struct{}{},
				latest: map[string]*liveMsg{}, resumed: h.seq, needsFull: true}
			h.topics[name] = t
		} else if len(t.subs) == 0 {
			// Not watched meanwhile: what changed was not recorded.
			t.idleSince, t.resumed, t.needsFull = time.Time{}, h.seq, true
			clear(t.latest)
		}
		if len(t.subs) > 0 && !watchedBy(t, v) {
			t.needsFull = true // this role's rendering does not exist yet
		}
		t.subs[sub] = struct{}{}
		sub.topics = append(sub.topics, t)
		switch {
		case t.needsFull:
			// The loop's next tick sends everything to every subscriber.
		case sinceOK && since >= t.resumed && since >= t.evicted:
			for _, m := range t.ring {
				if m.seq > since && (m.variant == allVariants || m.variant == v) {
					sub.push(t, m)
				}
			}
		default:
			h.resyncLocked(sub, t)
		}
	}
	h.subs[sub] = struct{}{}
	h.wake() // new topics and resyncs are served by the next tick, without waiting for the period
	if !h.running {
		h.running = true
		h.wg.Add(1)
		go h.loop()
	}
	return sub
}

func watchedBy(t *topic, v variant) bool {
	for s := range t.subs {
		if s.variant == v {
			return true
		}
	}
	return false
}

// unsubscribe removes a stream; topics left without subscribers linger for
// reconnects.
func (h *hub) unsubscribe(sub *liveSub) {
	sub.close()
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, sub)
	now := time.Now()
	for _, t := range sub.topics {
		delete(t.subs, sub)
		delete(t.fullFor, sub)
		if len(t.subs) == 0 {
			t.idleSince = now
		}
	}
}

// resync queues the current state of topics for a subscriber that missed
// messages.
func (h *hub) resync(sub *liveSub, ts []*topic) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range ts {
		h.resyncLocked(sub, t)
	}
}

func (h *hub) resyncLocked(sub *liveSub, t *topic) {
	for _, m := range t.latest {
		if m.variant == allVariants || m.variant == sub.variant {
			h.seq++
			sub.push(t, newMsg(h.epoch, h.seq, m.event, m.variant, m.data))
		}
	}
	if t.kind == kindJob {
		if t.fullFor == nil {
			t.fullFor = map[*liveSub]bool{}
		}
		t.fullFor[sub] = true
	}
}

// poke asks for the named topics to be re-read now (after an action).
func (h *hub) poke(names ...string) {
	h.mu.Lock()
	for _, n := range names {
		h.poked[n] = true
	}
	h.mu.Unlock()
	h.wake()
}

func (h *hub) wake() {
	select {
	case h.wakeC <- struct{}{}:
	default:
	}
}

// publishLocked records a message in t's ring and queues it for t's
// subscribers of its variant. keep marks a message that is the topic's
// current state of its region (sent again on resyncs).
func (h *hub) publishLocked(t *topic, event string, v variant, data []byte, keep bool) {
	h.seq++
	m := newMsg(h.epoch, h.seq, event, v, data)
	t.ring = append(t.ring, m)
	if len(t.ring) > ringSize {
		t.evicted = t.ring[0].seq
		t.ring[0] = nil
		t.ring = t.ring[1:]
	}
	if keep {
		t.latest[event+"/"+strconv.Itoa(int(v))] = m
	}
	for sub := range t.subs {
		if v == allVariants || sub.variant == v {
			sub.push(t, m)
		}
	}
}

// sendLocked queues a message for one subscriber only (a resync).
func (h *hub) sendLocked(sub *liveSub, t *topic, event string, v variant, data []byte) {
	h.seq++
	sub.push(t, newMsg(h.epoch, h.seq, event, v, data))
}

func newMsg(epoch string, seq uint64, event string, v variant, data []byte) *liveMsg {
	id := epoch + "." + strconv.FormatUint(seq, 10)
	return &liveMsg{seq: seq, event: event, variant: v, data: data, wire: frame(id, event, data)}
}

// frame encodes one SSE message. Carriage returns would end a data line
// early in the browser's parser, so line breaks are normalized to \n.
func frame(id, event string, data []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(data) + len(id) + len(event) + 32)
	fmt.Fprintf(&b, "id: %s\nevent: %s\n", id, event)
	data = bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
	for _, line := range bytes.Split(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// loop ticks while anyone is subscribed.
func (h *hub) loop() {
	defer h.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var done *notify.Subscription
	if l := h.d.s.Listener; l != nil {
		done = l.Subscribe(notify.ChannelDone, 1024)
		defer done.Close()
	}
	ticker := time.NewTicker(liveTick)
	defer ticker.Stop()
	var last time.Time
	st := &tickState{}
	for {
		if !h.d.s.ready.Load() {
			h.closeAll()
		}
		h.mu.Lock()
		if len(h.subs) == 0 {
			// Nobody watches: stop, and forget the topics (a later
			// subscriber gets their full state anyway).
			h.running = false
			clear(h.topics)
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()

		if gap := time.Since(last); gap < liveMinGap {
			time.Sleep(liveMinGap - gap)
		}
		last = time.Now()
		periodic := !last.Before(st.next)
		if periodic {
			st.next = last.Add(liveTick)
		}
		h.tick(ctx, st, periodic)

	wait:
		select {
		case <-ticker.C:
		case <-h.wakeC:
		case n := <-notes(done):
			// Take every notification already queued, then tick once.
			watched := h.noteDone(n, done, st)
			for more := true; more; {
				select {
				case n := <-done.C:
					watched = h.noteDone(n, done, st) || watched
				default:
					more = false
				}
			}
			if !watched {
				goto wait // nobody watches these jobs: no reason to tick early
			}
		}
	}
}

func notes(s *notify.Subscription) <-chan notify.Notification {
	if s == nil {
		return nil
	}
	return s.C
}

// noteDone records which of the ids of a dl_job_done notification are
// watched (as a job page or a list row), for the next tick to read, and
// reports whether any is. When notifications were lost (a reconnect, a full
// buffer), the next tick reads everything instead.
func (h *hub) noteDone(n notify.Notification, sub *notify.Subscription, st *tickState) bool {
	if n.Resync || sub.Missed() {
		st.next, st.rowsAt = time.Time{}, time.Time{}
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	any := false
	for _, id := range strings.Split(n.Payload, ",") {
		for _, prefix := range [...]string{"row:", "job:"} {
			if t := h.topics[prefix+id]; t != nil && len(t.subs) > 0 {
				h.done[t.jobID] = true
				any = true
			}
		}
	}
	return any
}

// closeAll ends every stream (the server is shutting down).
func (h *hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		sub.close()
	}
}
