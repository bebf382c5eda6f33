package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/dataloader/dataloader/internal/dbsqlc"
	"github.com/dataloader/dataloader/internal/job"
)

// Queues returns every queue that has jobs or settings, with counts by
// status, its paused state and the creation time of its oldest queued job.
func (s *Store) Queues(ctx context.Context) ([]job.QueueStats, error) {
	counts, err := s.q.JobCountByQueueStatus(ctx)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", mapErr(err))
	}
	settings, err := s.q.QueueList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", mapErr(err))
	}
	oldest, err := s.q.JobOldestQueued(ctx)
	if err != nil {
		return nil, fmt.Errorf("oldest queued: %w", mapErr(err))
	}
	byName := map[string]*job.QueueStats{}
	get := func(name string) *job.QueueStats {
		q, ok := byName[name]
		if !ok {
			q = &job.QueueStats{Queue: name, Counts: map[job.Status]int64{}}
			for _, st := range job.Statuses {
				q.Counts[st] = 0
			}
			byName[name] = q
		}
		return q
	}
	for _, c := range counts {
		get(c.Queue).Counts[job.Status(c.Status)] = c.N
	}
	for _, st := range settings {
		get(st.Queue).Paused = st.Paused
	}
	for _, o := range oldest {
		t := o.Oldest
		get(o.Queue).OldestQueuedAt = &t
	}
	out := make([]job.QueueStats, 0, len(byName))
	for _, q := range byName {
		out = append(out, *q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out, nil
}

// SetQueuePaused pauses or resumes a queue. Paused queues are skipped by the
// claim on every replica; resuming wakes their workers.
func (s *Store) SetQueuePaused(ctx context.Context, queue string, paused bool, by string) error {
	if queue == "" {
		return job.Invalid("queue", "is required")
	}
	if err := job.ValidText("queue", queue, job.MaxNameLen); err != nil {
		return err
	}
	if _, err := s.q.QueueSetPaused(ctx, dbsqlc.QueueSetPausedParams{Queue: queue, Paused: paused, By: &by}); err != nil {
		return fmt.Errorf("set queue %q paused=%v: %w", queue, paused, mapErr(err))
	}
	return nil
}

// WorkerInfo describes a live worker process.
type WorkerInfo struct {
	WorkerID    string          `json:"worker_id"`
	Host        string          `json:"host"`
	PID         int             `json:"pid"`
	Version     string          `json:"version"`
	Queues      json.RawMessage `json:"queues"`
	Running     int             `json:"running"`
	Draining    bool            `json:"draining"`
	DrainUntil  *time.Time      `json:"drain_deadline,omitempty"`
	StartedAt   time.Time       `json:"started_at"`
	HeartbeatAt time.Time       `json:"heartbeat_at"`
}

// UpsertWorker records that a worker process is alive.
func (s *Store) UpsertWorker(ctx context.Context, w WorkerInfo) error {
	err := s.q.WorkerUpsert(ctx, dbsqlc.WorkerUpsertParams{WorkerID: w.WorkerID, Host: w.Host, Pid: int32(w.PID),
		Version: w.Version, Queues: w.Queues, Running: int32(w.Running), Draining: w.Draining, DrainDeadline: w.DrainUntil})
	if err != nil {
		return fmt.Errorf("upsert worker: %w", mapErr(err))
	}
	return nil
}

// DeleteWorker removes a worker's row on a clean exit.
func (s *Store) DeleteWorker(ctx context.Context, workerID string) error {
	if err := s.q.WorkerDelete(ctx, workerID); err != nil {
		return fmt.Errorf("delete worker: %w", mapErr(err))
	}
	return nil
}

// Workers lists workers seen within staleAfter.
func (s *Store) Workers(ctx context.Context, staleAfter time.Duration) ([]WorkerInfo, error) {
	rows, err := s.q.WorkerList(ctx, staleAfter.Seconds())
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", mapErr(err))
	}
	out := make([]WorkerInfo, len(rows))
	for i, r := range rows {
		out[i] = WorkerInfo{WorkerID: r.WorkerID, Host: r.Host, PID: int(r.Pid), Version: r.Version, Queues: r.Queues,
			Running: int(r.Running), Draining: r.Draining, DrainUntil: r.DrainDeadline, StartedAt: r.StartedAt, HeartbeatAt: r.HeartbeatAt}
	}
	return out, nil
}

// DeleteStaleWorkers removes registry rows not refreshed within staleAfter
// (processes that died without a clean exit).
func (s *Store) DeleteStaleWorkers(ctx context.Context, staleAfter time.Duration) error {
	if err := s.q.WorkerDeleteStale(ctx, staleAfter.Seconds()); err != nil {
		return fmt.Errorf("delete stale workers: %w", mapErr(err))
	}
	return nil
}
