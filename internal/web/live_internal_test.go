package web

import (
	"bytes"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/dataloader/dataloader/internal/metrics"
	"github.com/dataloader/dataloader/internal/pgtest"
	"github.com/dataloader/dataloader/internal/store"
)

func TestFrameSplitsLinesAndNormalizesLineBreaks(t *testing.T) {
	t.Parallel()
	got := string(frame("e.7", "job-summary", []byte("<p>a</p>\r\n<pre>b\rc</pre>")))
	want := "id: e.7\nevent: job-summary\ndata: <p>a</p>\ndata: <pre>b\ndata: c</pre>\n\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSlowSubscriberDropsMessagesAndIsResyncedInstead(t *testing.T) {
	t.Parallel()
	sub := &liveSub{wake: make(chan struct{}, 1), bye: make(chan struct{})}
	a, b := &topic{name: "a"}, &topic{name: "b"}
	for i := 0; i < subscriberQueue+10; i++ {
		sub.push(a, &liveMsg{seq: uint64(i)})
	}
	sub.push(b, &liveMsg{seq: 1000})
	msgs, resync := sub.take()
	if len(msgs) != subscriberQueue {
		t.Errorf("queued %d messages, want the bound %d", len(msgs), subscriberQueue)
	}
	if len(resync) != 2 {
		t.Errorf("resync %d topics, want both topics whose messages were dropped", len(resync))
	}
	// Drained: it takes messages again, and no resync is pending.
	sub.push(a, &liveMsg{seq: 2000})
	msgs, resync = sub.take()
	if len(msgs) != 1 || len(resync) != 0 {
		t.Errorf("after draining: got %d messages and %d resyncs, want 1 and 0", len(msgs), len(resync))
	}
}

func TestHubLoopRunsOnlyWhileSomeoneWatches(t *testing.T) {
	t.Parallel()
	s := New(Deps{Store: store.New(pgtest.Pool(t)), Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	d := &dashboard{s: s, counts: newCountsCache(s.Store, s.Log), tp: newThroughput(s.Store)}
	h := newHub(d)
	sub1 := h.subscribe([]string{topicQueues}, variantViewer, "")
	sub2 := h.subscribe([]string{topicQueues, topicWorkers}, variantOperator, h.cursor())
	select {
	case <-sub1.wake:
	case <-time.After(5 * time.Second):
		t.Fatal("no message within 5 s")
	}
	msgs, _ := sub1.take()
	if len(msgs) != 1 || msgs[0].event != "queues-table" || !bytes.Contains(msgs[0].data, []byte("No queues yet")) {
		t.Fatalf("first message: got %d messages %v", len(msgs), msgs)
	}
	h.unsubscribe(sub1)
	h.unsubscribe(sub2)
	stopped := make(chan struct{})
	go func() { h.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not stop after the last subscriber left")
	}
	h.mu.Lock()
	n := len(h.topics)
	h.mu.Unlock()
	if n != 0 {
		t.Errorf("%d topics kept after the loop stopped, want 0", n)
	}
	d.counts.wg.Wait()
	d.bg.Wait()
}
