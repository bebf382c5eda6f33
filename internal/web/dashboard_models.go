package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/google/uuid"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
	"github.com/dataloader/dataloader/views"
)

// The functions here turn store data into view models. Pages and the live
// hub both call them, so a region looks the same whether it was rendered
// for a page load, a poll or a live message.

// timelineSize is how many events the job page and the live timeline show
// (older ones load on demand).
const timelineSize = 100

// workerStaleAfter is how long a worker may be silent before the dashboard
// stops counting it as live (a few heartbeats at the default 10 s).
const workerStaleAfter = 45 * time.Second

func jobRowView(j job.Job) views.JobRow {
	r := views.JobRow{ID: j.ID.String(), Queue: j.Queue, Task: j.Task, LockKey: j.LockKey, Status: string(j.Status),
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, CancelRequested: j.CancelRequested, CreatedAt: j.CreatedAt,
		StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, Error: deref(j.Error)}
	if p, ok := parseProgress(j.Progress); ok {
		r.Progress = &p
	}
	return r
}

// parseProgress reads the {done, total, unit, stage, message} convention of
// job.Progress; other progress JSON is shown raw.
func parseProgress(raw json.RawMessage) (views.ProgressView, bool) {
	var p job.Progress
	if len(bytes.TrimSpace(raw)) == 0 || json.Unmarshal(raw, &p) != nil {
		return views.ProgressView{}, false
	}
	if p.Done == 0 && p.Total == 0 && p.Stage == "" && p.Message == "" {
		return views.ProgressView{}, false
	}
	return views.ProgressView{Done: p.Done, Total: p.Total, Unit: p.Unit, Stage: p.Stage, Message: p.Message}, true
}

// jobView builds the live summary of a job. events are its recent journal
// (oldest first), used for the ETA and the wait explanation; facts is nil
// unless the job is queued.
func jobView(now time.Time, j job.Job, events []job.Event, facts *store.WaitFacts) views.JobView {
	v := views.JobView{Now: now, ID: j.ID.String(), Queue: j.Queue, Task: j.Task, LockKey: j.LockKey,
		PartitionKey: j.PartitionKey, Status: string(j.Status), Priority: j.Priority, Attempt: j.Attempt,
		MaxAttempts: j.MaxAttempts, LeaseTTLSec: j.LeaseTTLSec, CancelRequested: j.CancelRequested,
		IdempotencyKey: deref(j.IdempotencyKey), Producer: deref(j.Producer), WorkerID: deref(j.WorkerID),
		CreatedAt: j.CreatedAt, AvailableAt: j.AvailableAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt,
		LeaseExpiresAt: j.LeaseExpiresAt, HeartbeatAt: j.HeartbeatAt, Error: deref(j.Error), Result: prettyJSON(j.Result)}
	if p, ok := parseProgress(j.Progress); ok {
		if j.Status == job.StatusRunning {
			p.ETA = estimateETA(p, events)
		}
		v.Progress = &p
	} else if s := prettyJSON(j.Progress); s != "" && s != "{}" {
		v.ProgressJSON = s
	}
	if j.Status == job.StatusQueued {
		v.Waiting = waitReasons(now, j, events, facts)
	}
	return v
}

// estimateETA extrapolates the rate between the first and the last progress
// event of the current attempt (after its last "picked" event).
func estimateETA(p views.ProgressView, events []job.Event) *time.Time {
	if p.Total <= 0 || p.Done >= p.Total {
		return nil
	}
	var first, last *job.Event
	var firstDone, lastDone int64
	for i := range events {
		e := &events[i]
		switch e.Kind {
		case job.EventPicked:
			first, last = nil, nil // a new attempt: measure its own rate
		case job.EventProgress:
			var pp job.Progress
			if json.Unmarshal(e.Payload, &pp) != nil {
				continue
			}
			if first == nil {
				first, firstDone = e, pp.Done
			}
			last, lastDone = e, pp.Done
		}
	}
	if first == nil || last == nil || lastDone <= firstDone || !last.TS.After(first.TS) {
		return nil
	}
	perUnit := last.TS.Sub(first.TS) / time.Duration(lastDone-firstDone)
	eta := last.TS.Add(perUnit * time.Duration(p.Total-p.Done)).Truncate(time.Second)
	return &eta
}

// waitReasons explains why a queued job is not running.
func waitReasons(now time.Time, j job.Job, events []job.Event, f *store.WaitFacts) []views.WaitReason {
	var out []views.WaitReason
	add := func(kind, text string, ref uuid.UUID, until *time.Time) {
		r := views.WaitReason{Kind: kind, Text: text, Until: until}
		if ref != uuid.Nil {
			r.JobID = ref.String()
		}
		out = append(out, r)
	}
	if f != nil && f.QueuePaused {
		add("paused", fmt.Sprintf("Queue %s is paused; resume it on the Queues page.", j.Queue), uuid.Nil, nil)
	}
	if j.AvailableAt.After(now) {
		until := j.AvailableAt
		switch last := lastTransition(events); {
		case last != nil && last.Kind == job.EventFailed:
			add("backoff", fmt.Sprintf("Backing off after attempt %d failed; it runs again", j.Attempt), uuid.Nil, &until)
		case last != nil && last.Kind == job.EventLockConflict:
			add("backoff", fmt.Sprintf("Its lock key %q was busy when a worker claimed it; it is tried again", j.LockKey), uuid.Nil, &until)
		default:
			add("scheduled", "Scheduled to run later", uuid.Nil, &until)
		}
	}
	if f != nil {
		if f.Holder != uuid.Nil {
			add("lock_held", fmt.Sprintf("Its lock key %q is held by running job", j.LockKey), f.Holder, nil)
		} else if f.Earlier != uuid.Nil {
			add("lock_earlier", fmt.Sprintf("An earlier job of lock key %q runs first:", j.LockKey), f.Earlier, nil)
		}
		if f.Workers == 0 {
			add("no_worker", fmt.Sprintf("No live worker process serves queue %s.", j.Queue), uuid.Nil, nil)
		}
		if len(out) == 0 {
			ahead := fmt.Sprintf("%d", f.Ahead)
			if f.Ahead >= 1000 {
				ahead = "over 1,000"
			}
			add("ready", fmt.Sprintf("Ready and waiting for a free worker slot: %s jobs of queue %s go first.", ahead, j.Queue), uuid.Nil, nil)
		}
	}
	return out
}

// lastTransition is the newest event that moved the job (heartbeats and
// progress do not).
func lastTransition(events []job.Event) *job.Event {
	for i := len(events) - 1; i >= 0; i-- {
		switch events[i].Kind {
		case job.EventHeartbeat, job.EventProgress:
			continue
		}
		return &events[i]
	}
	return nil
}

func eventViews(evs []job.Event) []views.EventView {
	out := make([]views.EventView, len(evs))
	for i, e := range evs {
		out[i] = views.EventView{ID: e.ID, TS: e.TS, Kind: e.Kind, Detail: compactJSON(e.Payload)}
	}
	return out
}

// timelineView shows events (the newest timelineSize, oldest first);
// earlier ones exist when the journal holds as many as were asked for.
func timelineView(id uuid.UUID, evs []job.Event, asked int) views.TimelineView {
	t := views.TimelineView{JobID: id.String(), Events: eventViews(evs)}
	if len(evs) >= asked && len(evs) > 0 {
		t.EarlierBefore = evs[0].ID
	}
	return t
}

func prettyJSON(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

func compactJSON(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" || string(bytes.TrimSpace(raw)) == "{}" {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// fingerprint hashes a view model so the live hub can tell whether a region
// changed since it last sent it. Callers zero the model's Now first: the
// relative times it feeds are kept current by app.js, not by re-sending.
func fingerprint(v any) uint64 {
	h := fnv.New64a()
	_ = json.NewEncoder(h).Encode(v)
	return h.Sum64()
}
