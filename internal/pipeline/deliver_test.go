package pipeline_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/pipeline"
)

// receiver is a test endpoint answering each POST with the next scripted
// status (the last one repeats) and recording when each arrived.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	header   http.Header // extra answer headers
	hold     chan struct{}
	arrivals []time.Time
	bodies   []string
	reqHdrs  []http.Header
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses, header: http.Header{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		n := len(r.arrivals)
		r.arrivals = append(r.arrivals, time.Now())
		r.bodies = append(r.bodies, string(body))
		r.reqHdrs = append(r.reqHdrs, req.Header.Clone())
		status := r.statuses[min(n, len(r.statuses)-1)]
		hold := r.hold
		for k, v := range r.header {
			w.Header()[k] = v
		}
		r.mu.Unlock()
		if hold != nil {
			<-hold
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"answer":` + http.StatusText(status)[:0] + `"` + strings.Repeat("x", 600) + `"}`))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) got() ([]time.Time, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.arrivals...), append([]string(nil), r.bodies...)
}

func deliverJob(args pipeline.DeliverArgs) job.TriggerParams {
	return job.TriggerParams{Queue: "out", Task: pipeline.DeliverTask, Args: jsonArgs(args), LockKey: uuid.NewString()}
}

type attempt struct {
	Attempt   int    `json:"attempt"`
	Status    int    `json:"status"`
	LatencyMS int64  `json:"latency_ms"`
	Excerpt   string `json:"excerpt"`
	RetryInMS *int64 `json:"retry_in_ms"`
}

func (e *env) attempts(id uuid.UUID) []attempt {
	e.t.Helper()
	var out []attempt
	for _, ev := range e.events(id, pipeline.EventDeliveryAttempt) {
		var a attempt
		mustUnmarshal(e.t, ev.Payload, &a)
		out = append(out, a)
	}
	return out
}

func TestDeliverRetries5xxWithExponentialBackoffAndJournalsEveryAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rcv := newReceiver(t, 503, 503, 200)
	e.startManager("out", 2)
	activity := `{"@context":"https://www.w3.org/ns/activitystreams","type":"Create","actor":"https://a.example/u/1"}`
	id := e.trigger(deliverJob(pipeline.DeliverArgs{URL: rcv.URL + "/inbox", Body: &activity,
		Headers: map[string]string{"Content-Type": "application/activity+json", "X-Test": "1"}, BackoffMS: 100, MaxBackoffMS: 10_000}))
	j := e.waitStatus(id, job.StatusSucceeded, 15*time.Second)
	arrivals, bodies := rcv.got()
	if len(arrivals) != 3 || j.Attempt != 3 {
		t.Fatalf("got %d requests and attempt %d, want 3", len(arrivals), j.Attempt)
	}
	// factor × 2^(n−1) with up to 20 % jitter taken off: 80-100 ms, then 160-200 ms.
	for i, d := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		gap := arrivals[i+1].Sub(arrivals[i])
		if gap < d*8/10 || gap > d+700*time.Millisecond {
			t.Errorf("gap %d: got %v, want %v-%v (+ claim latency)", i+1, gap, d*8/10, d)
		}
	}
	if bodies[0] != activity || rcv.reqHdrs[0].Get("Content-Type") != "application/activity+json" ||
		rcv.reqHdrs[0].Get("X-Test") != "1" || rcv.reqHdrs[0].Get("Idempotency-Key") != id.String() {
		t.Errorf("got body %s and headers %v, want the payload as is with the configured headers", bodies[0], rcv.reqHdrs[0])
	}
	got := e.attempts(id)
	if len(got) != 3 {
		t.Fatalf("got %d delivery_attempt events, want 3", len(got))
	}
	for i, want := range []int{503, 503, 200} {
		a := got[i]
		if a.Attempt != i+1 || a.Status != want || len(a.Excerpt) != pipeline.MaxExcerptBytes {
			t.Errorf("attempt %d: got %+v, want status %d and a %d-byte excerpt", i+1, a, want, pipeline.MaxExcerptBytes)
		}
	}
	for i, d := range []int64{100, 200} {
		if r := got[i].RetryInMS; r == nil || *r < d*8/10 || *r > d {
			t.Errorf("attempt %d: got retry_in_ms %v, want %d-%d", i+1, r, d*8/10, d)
		}
	}
}

func TestDeliverFailsAtOnceOnA4xx(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rcv := newReceiver(t, 404)
	e.startManager("out", 1)
	id := e.trigger(deliverJob(pipeline.DeliverArgs{URL: rcv.URL, Payload: json.RawMessage(`{}`), BackoffMS: 10}))
	j := e.waitStatus(id, job.StatusFailed, 10*time.Second)
	time.Sleep(300 * time.Millisecond) // no second attempt follows
	if arrivals, _ := rcv.got(); len(arrivals) != 1 || j.Attempt != 1 || !strings.Contains(deref(j.Error), "HTTP 404") {
		t.Errorf("got %d requests, attempt %d, error %q; want one attempt failed with HTTP 404", len(arrivals), j.Attempt, deref(j.Error))
	}
	if got := e.attempts(id); len(got) != 1 || got[0].Status != 404 {
		t.Errorf("got attempts %+v, want one with status 404", got)
	}
}

func TestDeliverHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rcv := newReceiver(t, 429, 200)
	rcv.header.Set("Retry-After", "2")
	e.startManager("out", 1)
	id := e.trigger(deliverJob(pipeline.DeliverArgs{URL: rcv.URL, Payload: json.RawMessage(`{"n": 1}`), BackoffMS: 100}))
	e.waitStatus(id, job.StatusSucceeded, 15*time.Second)
	arrivals, bodies := rcv.got()
	if bodies[0] != `{"n": 1}` || rcv.reqHdrs[0].Get("Content-Type") != "application/json" {
		t.Errorf("got body %s, content type %q; want the JSON payload as application/json", bodies[0], rcv.reqHdrs[0].Get("Content-Type"))
	}
	if len(arrivals) != 2 {
		t.Fatalf("got %d requests, want 2", len(arrivals))
	}
	if gap := arrivals[1].Sub(arrivals[0]); gap < 2*time.Second {
		t.Errorf("got the next attempt %v later, want ≥ 2 s (Retry-After: 2)", gap)
	}
	if got := e.attempts(id); len(got) != 2 || got[0].Status != 429 || got[0].RetryInMS == nil || *got[0].RetryInMS != 2000 {
		t.Errorf("got attempts %+v, want 429 with retry_in_ms 2000, then 200", got)
	}
}

func TestDeliverTransportErrorsAndTimeoutsRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rcv := newReceiver(t, 200)
	rcv.hold = make(chan struct{})
	e.startManager("out", 1)
	id := e.trigger(job.TriggerParams{Queue: "out", Task: pipeline.DeliverTask, LockKey: "k", MaxAttempts: ptr(2),
		Args: jsonArgs(pipeline.DeliverArgs{URL: rcv.URL, Payload: json.RawMessage(`{}`), TimeoutMS: 200, BackoffMS: 50})})
	j := e.waitStatus(id, job.StatusFailed, 15*time.Second)
	close(rcv.hold)
	got := e.attempts(id)
	if j.Attempt != 2 || len(got) != 2 || got[0].Status != 0 || got[0].RetryInMS == nil {
		t.Errorf("got attempt %d and attempts %+v, want two timed-out attempts (status 0), the first retried", j.Attempt, got)
	}
}

func TestNewerQueuedDeliverySupersedesOlderQueuedOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rcv := newReceiver(t, 200)
	deliver := func(n int) uuid.UUID {
		p := deliverJob(pipeline.DeliverArgs{URL: rcv.URL, Body: ptr(`{"version":` + strconv.Itoa(n) + `}`)})
		p.CoalesceKey = ptr("actor-1/profile")
		return e.trigger(p)
	}
	older, newer := deliver(1), deliver(2)
	e.startManager("out", 2)
	e.waitStatus(newer, job.StatusSucceeded, 10*time.Second)
	if _, bodies := rcv.got(); len(bodies) != 1 || bodies[0] != `{"version":2}` {
		t.Errorf("got deliveries %v, want only the newer one", bodies)
	}
	o := e.get(older)
	sup := e.events(older, "superseded")
	if o.Status != job.StatusCanceled || len(sup) != 1 || !strings.Contains(string(sup[0].Payload), newer.String()) {
		t.Errorf("older: got %s with superseded events %v, want canceled, superseded by %s", o.Status, sup, newer)
	}

	// A running delivery is never superseded: both are sent.
	rcv.mu.Lock()
	rcv.hold = make(chan struct{})
	rcv.mu.Unlock()
	running := deliver(3)
	e.waitStatus(running, job.StatusRunning, 10*time.Second)
	for {
		if arrivals, _ := rcv.got(); len(arrivals) == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	rcv.mu.Lock()
	hold := rcv.hold
	rcv.hold = nil
	rcv.mu.Unlock()
	latest := deliver(4)
	close(hold)
	e.waitStatus(running, job.StatusSucceeded, 10*time.Second)
	e.waitStatus(latest, job.StatusSucceeded, 10*time.Second)
	if _, bodies := rcv.got(); len(bodies) != 3 || bodies[2] != `{"version":4}` {
		t.Errorf("got deliveries %v, want versions 2, 3 and 4", bodies)
	}
}

func TestDeliverArgsAreValidated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startManager("out", 2)
	for _, args := range []string{
		`{"url":"ftp://x","payload":{}}`,
		`{"url":"http://x","payload":{},"headers":{"Host":"evil"}}`,
		`{"url":"http://x"}`,
		`{"url":"http://x","payload":{},"body":"{}"}`,
		`{"url":"http://x","payload":{},"retries":3}`,
	} {
		id := e.trigger(job.TriggerParams{Queue: "out", Task: pipeline.DeliverTask, LockKey: "k", Args: json.RawMessage(args)})
		if j := e.waitFinished(id, 10*time.Second); j.Status != job.StatusFailed || j.Attempt != 1 || !strings.Contains(deref(j.Error), "args") {
			t.Errorf("%s: got %s after %d attempts (%q), want failed at once naming the args", args, j.Status, j.Attempt, deref(j.Error))
		}
	}
}

func TestConcurrentCoalescedTriggersLeaveOneQueuedJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := deliverJob(pipeline.DeliverArgs{URL: "http://127.0.0.1:1/", Body: ptr(strconv.Itoa(i))})
			p.CoalesceKey = ptr("hot-key")
			if _, err := e.store.Trigger(t.Context(), p, 60); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if q, c := e.scalar("SELECT count(*) FROM dl_jobs WHERE status = 'queued'"), e.scalar("SELECT count(*) FROM dl_jobs WHERE status = 'canceled'"); q != 1 || c != 19 {
		t.Errorf("got %d queued and %d canceled, want 1 and 19", q, c)
	}
	if n := e.scalar("SELECT count(*) FROM dl_job_events WHERE kind = 'superseded'"); n != 19 {
		t.Errorf("got %d superseded events, want 19", n)
	}
}
