package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dataloader/dataloader/internal/job"
)

// DeliverTask is the name of the HTTP delivery task.
const DeliverTask = "http.deliver"

// EventDeliveryAttempt is the journal kind of one delivery attempt: its
// status code (0 for a transport error), latency and a response excerpt.
const EventDeliveryAttempt = "delivery_attempt"

// Delivery limits and defaults.
const (
	MaxExcerptBytes    = 512
	DefaultTimeout     = 10 * time.Second
	MaxTimeout         = 5 * time.Minute
	DefaultBackoff     = 5 * time.Second
	DefaultMaxBackoff  = time.Hour
	MaxRetryAfter      = 24 * time.Hour
	deliverJitter      = 0.2
	drainResponseBytes = 64 << 10
)

// DeliverRetry is http.deliver's backoff with the default factor and cap;
// the handler computes each failure's delay itself from its args (and
// Retry-After) and hands it to the worker with job.RetryAfter.
var DeliverRetry job.RetryPolicy = job.Exponential{Base: DefaultBackoff, Cap: DefaultMaxBackoff, Jitter: deliverJitter}

// DeliverArgs are http.deliver's args.
type DeliverArgs struct {
	// URL receives the POST (http or https).
	URL string `json:"url"`
	// Payload is the JSON body. Args are stored as jsonb, which normalizes
	// JSON (key order, spacing): use Body when the exact bytes matter
	// (e.g. a signed Digest header).
	Payload json.RawMessage `json:"payload,omitempty"`
	// Body is the body as text, sent byte for byte; exactly one of Payload
	// and Body is given.
	Body *string `json:"body,omitempty"`
	// Headers are extra request headers (Content-Type defaults to
	// application/json; Idempotency-Key to the job id).
	Headers map[string]string `json:"headers,omitempty"`
	// TimeoutMS bounds one attempt (default 10 s, at most 5 min).
	TimeoutMS int `json:"timeout_ms,omitempty"`
	// BackoffMS is the factor of the backoff factor × 2^(n−1) after the
	// n-th failed attempt (default 5 s), jittered by up to 20 % less and
	// capped at MaxBackoffMS (default 1 h). A Retry-After answer waits at
	// least as long as it asks (at most 24 h).
	BackoffMS    int `json:"backoff_ms,omitempty"`
	MaxBackoffMS int `json:"max_backoff_ms,omitempty"`
}

// reservedHeaders are set by the transport, never by args.
var reservedHeaders = map[string]bool{"Host": true, "Content-Length": true, "Transfer-Encoding": true,
	"Connection": true, "Te": true, "Trailer": true, "Upgrade": true}

// Validate checks the args.
func (a *DeliverArgs) Validate() error {
	u, err := url.Parse(a.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return job.Invalid("args.url", "must be an absolute http or https URL")
	}
	if (len(bytes.TrimSpace(a.Payload)) == 0) == (a.Body == nil) {
		return job.Invalid("args.payload", "exactly one of payload (any JSON value) and body (text) is required")
	}
	for k, v := range a.Headers {
		if !validHeaderName(k) || reservedHeaders[http.CanonicalHeaderKey(k)] {
			return job.Invalid("args.headers", "%q cannot be set", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return job.Invalid("args.headers", "value of %q must not contain CR, LF or NUL", k)
		}
	}
	switch {
	case a.TimeoutMS < 0 || time.Duration(a.TimeoutMS)*time.Millisecond > MaxTimeout:
		return job.Invalid("args.timeout_ms", "must be between 1 and %d", MaxTimeout.Milliseconds())
	case a.BackoffMS < 0 || a.MaxBackoffMS < 0 || a.BackoffMS > a.MaxBackoffMS:
		return job.Invalid("args.backoff_ms", "must be positive and at most max_backoff_ms")
	}
	return nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// Deliver is the http.deliver handler. Each attempt is one POST, recorded
// in the journal; failures worth retrying return their delay to the worker
// with job.RetryAfter, so a waiting delivery is a queued row with a later
// available_at and holds no worker slot.
type Deliver struct{ deps Deps }

// NewDeliver returns the http.deliver handler.
func NewDeliver(d Deps) *Deliver { return &Deliver{deps: d} }

// attemptEvent is the payload of a delivery_attempt event.
type attemptEvent struct {
	Attempt   int    `json:"attempt"`
	Status    int    `json:"status"` // 0: no response
	LatencyMS int64  `json:"latency_ms"`
	Excerpt   string `json:"excerpt,omitempty"`
	Error     string `json:"error,omitempty"`
	RetryInMS *int64 `json:"retry_in_ms,omitempty"`
}

// Work implements job.Handler.
func (d *Deliver) Work(ctx context.Context, run job.Run) error {
	a := DeliverArgs{TimeoutMS: int(DefaultTimeout.Milliseconds()), BackoffMS: int(DefaultBackoff.Milliseconds()),
		MaxBackoffMS: int(DefaultMaxBackoff.Milliseconds())}
	if err := job.DecodeArgs(run.Job().Args, &a); err != nil {
		return err
	}
	c := run.Job()
	status, latency, excerpt, header, err := d.post(ctx, &a, c)
	ev := attemptEvent{Attempt: c.Attempt, Status: status, LatencyMS: latency.Milliseconds(), Excerpt: excerpt}
	var outcome error
	switch {
	case err != nil && ctx.Err() != nil:
		ev.Error = "interrupted: " + context.Cause(ctx).Error()
		outcome = context.Cause(ctx)
	case err != nil && job.IsPermanent(err):
		ev.Error = err.Error()
		outcome = err
	case err != nil:
		ev.Error = err.Error()
		outcome = d.retry(&a, c.Attempt, nil, fmt.Errorf("deliver: %w", err), &ev)
	case status/100 == 2:
		res, _ := json.Marshal(map[string]any{"status": status, "latency_ms": ev.LatencyMS, "attempt": c.Attempt})
		run.SetResult(res)
	case retryableStatus(status):
		outcome = d.retry(&a, c.Attempt, header, fmt.Errorf("deliver: HTTP %d", status), &ev)
	default:
		outcome = job.Permanent(fmt.Errorf("deliver: HTTP %d (not retried)", status))
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := run.Event(wctx, EventDeliveryAttempt, ev); err != nil {
		if errors.Is(err, job.ErrLeaseLost) {
			return err // the attempt is not ours any more: nothing we write counts
		}
		d.deps.log().Warn("could not journal a delivery attempt", "job_id", c.ID, "error", err)
	}
	return outcome
}

// post makes one attempt and returns the status, latency, a bounded excerpt
// of the response and its header.
func (d *Deliver) post(ctx context.Context, a *DeliverArgs, c job.Claimed) (int, time.Duration, string, http.Header, error) {
	rctx, cancel := context.WithTimeout(ctx, time.Duration(a.TimeoutMS)*time.Millisecond)
	defer cancel()
	body := []byte(a.Payload)
	if a.Body != nil {
		body = []byte(*a.Body)
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, a.URL, bytes.NewReader(body))
	if err != nil {
		return 0, 0, "", nil, job.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "dataloader http.deliver")
	req.Header.Set("Idempotency-Key", c.ID.String())
	for k, v := range a.Headers {
		req.Header.Set(k, v)
	}
	client := *d.deps.client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, time.Since(start), "", nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxExcerptBytes))
	latency := time.Since(start) // to the first bytes of the body
	// Reading a bounded rest lets the connection be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainResponseBytes))
	return resp.StatusCode, latency, excerpt(b), resp.Header, nil
}

// retry returns err carrying this failure's delay: factor × 2^(n−1),
// capped and jittered, or Retry-After when that asks for longer.
func (d *Deliver) retry(a *DeliverArgs, attempt int, h http.Header, err error, ev *attemptEvent) error {
	policy := job.Exponential{Base: time.Duration(a.BackoffMS) * time.Millisecond,
		Cap: time.Duration(a.MaxBackoffMS) * time.Millisecond, Jitter: deliverJitter}
	delay := policy.Backoff(attempt)
	if ra, ok := retryAfter(h, time.Now()); ok && ra > delay {
		delay = ra
	}
	ms := delay.Milliseconds()
	ev.RetryInMS = &ms
	return job.RetryAfter(err, delay)
}

// retryableStatus reports whether an HTTP status is worth another attempt.
func retryableStatus(code int) bool {
	return code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		d = time.Duration(min(secs, int64(MaxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = max(t.Sub(now), 0)
	} else {
		return 0, false
	}
	return min(d, MaxRetryAfter), true
}

// excerpt makes a response excerpt storable as JSON text in jsonb: valid
// UTF-8 (a cut rune is dropped), no NUL.
func excerpt(b []byte) string {
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.Valid(b); i++ {
		r, size := utf8.DecodeLastRune(b)
		if r != utf8.RuneError || size > 1 {
			break
		}
		b = b[:len(b)-1]
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "")
}
