package web_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dataloader/dataloader/internal/journal"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/internal/web"
)

// withJournal runs a journal tailer for the server.
func withJournal(t *testing.T) func(*web.Deps) {
	return func(d *web.Deps) {
		tl := journal.New(d.Store, discardLogger())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = tl.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		d.Journal = tl
	}
}

// readStream reads job_event ids from the export stream after cursor until
// stop says so; each id is passed to onEvent, which may ask to disconnect.
func (e *apiEnv) readStream(ctx context.Context, after int64, onEvent func(id int64) (disconnect bool)) (last int64, err error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.ts.URL+"/api/v1/events/stream", nil)
	req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	e.authorize(req)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return after, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return after, fmt.Errorf("status %d", res.StatusCode)
	}
	last = after
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "id: ") {
			continue
		}
		id, _ := strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
		last = id
		if onEvent(id) {
			return last, nil
		}
	}
	return last, sc.Err()
}

func TestExportStreamDeliversEveryEventOnceInOrderAcrossReconnectsAndSlowReads(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, withJournal(t))
	st := store.New(e.pool)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Writers in parallel transactions, so event ids commit out of order.
	const writers, batches, perBatch = 4, 15, 20
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; b < batches; b++ {
				jobs := make([]store.NewJob, perBatch)
				for i := range jobs {
					jobs[i] = store.NewJob{Queue: "exp", Task: "t", LockKey: fmt.Sprintf("w%d-%d-%d", w, b, i)}
				}
				if _, err := st.TriggerMany(ctx, jobs, 60); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Duration(rand.IntN(10)) * time.Millisecond)
			}
		}()
	}
	const total = writers * batches * perBatch

	var mu sync.Mutex
	got := map[string][]int64{}
	record := func(who string, id int64) int {
		mu.Lock()
		defer mu.Unlock()
		got[who] = append(got[who], id)
		return len(got[who])
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { // reconnects at random points with Last-Event-ID
		defer readers.Done()
		cursor := int64(0)
		for n := 0; n < total && ctx.Err() == nil; {
			until := n + 1 + rand.IntN(150)
			cursor, _ = e.readStream(ctx, cursor, func(id int64) bool {
				n = record("reconnecting", id)
				return n >= until || n >= total
			})
		}
	}()
	go func() { // reads slowly
		defer readers.Done()
		_, _ = e.readStream(ctx, 0, func(id int64) bool {
			n := record("slow", id)
			if n%50 == 0 {
				time.Sleep(100 * time.Millisecond)
			}
			return n >= total
		})
	}()
	wg.Wait()
	readers.Wait()

	rows, err := e.pool.Query(ctx, `SELECT event_id FROM dl_job_events ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for rows.Next() {
		var id int64
		_ = rows.Scan(&id)
		want = append(want, id)
	}
	if len(want) != total {
		t.Fatalf("journal has %d events, want %d", len(want), total)
	}
	for who, ids := range got {
		if len(ids) != len(want) {
			t.Errorf("%s got %d events, want %d", who, len(ids), len(want))
			continue
		}
		for i := range ids {
			if ids[i] != want[i] {
				t.Errorf("%s: event %d is id %d, want %d (every event once, in order)", who, i, ids[i], want[i])
				break
			}
		}
	}
}

func TestExportStreamEndsWithAnEndEventOnDrain(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, withJournal(t))
	req, _ := http.NewRequest(http.MethodGet, e.ts.URL+"/api/v1/events/stream", nil)
	e.authorize(req)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	time.AfterFunc(200*time.Millisecond, func() { e.srv.SetReady(false) })
	sc := bufio.NewScanner(res.Body)
	sawEnd := false
	for sc.Scan() {
		if sc.Text() == "event: end" {
			sawEnd = true
		}
	}
	if !sawEnd {
		t.Error("stream closed without an end event")
	}
}
