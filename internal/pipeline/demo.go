// Package pipeline holds dataloader's built-in task handlers.
package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/worker"
)

// DemoSleepTask is the name of the synthetic demo task.
const DemoSleepTask = "demo.sleep"

// DemoSleepArgs configures demo.sleep: Chunks steps of ChunkMS milliseconds
// each, reporting progress after every step. FailAttempts makes the first N
// attempts fail (to show retries); Fail makes every attempt fail permanently.
type DemoSleepArgs struct {
	Chunks       int    `json:"chunks"`
	ChunkMS      int    `json:"chunk_ms"`
	FailAttempts int    `json:"fail_attempts"`
	Fail         string `json:"fail"`
}

// DemoSleep is a synthetic job for demos, benchmarks and tests: it sleeps in
// chunks, reports progress, checks cancellation between chunks, and can be
// told to fail.
func DemoSleep(ctx context.Context, run job.Run) error {
	a := DemoSleepArgs{Chunks: 10, ChunkMS: 500}
	if args := run.Job().Args; len(bytes.TrimSpace(args)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return job.Permanent(fmt.Errorf("demo.sleep args: %w", err))
		}
	}
	if a.Chunks < 0 || a.ChunkMS < 0 || a.Chunks > 1_000_000 {
		return job.Permanent(errors.New("demo.sleep args: chunks and chunk_ms must be non-negative"))
	}
	if a.Fail != "" {
		return job.Permanent(errors.New(a.Fail))
	}
	if run.Job().Attempt <= a.FailAttempts {
		return fmt.Errorf("demo.sleep: attempt %d fails on purpose (fail_attempts=%d)", run.Job().Attempt, a.FailAttempts)
	}
	done := int64(0)
	var p job.Progress
	if err := json.Unmarshal(run.Job().Progress, &p); err == nil && p.Total == int64(a.Chunks) {
		done = p.Done // resume where the previous attempt stopped
	}
	for i := done; i < int64(a.Chunks); i++ {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(time.Duration(a.ChunkMS) * time.Millisecond):
		}
		run.Progress(job.Progress{Done: i + 1, Total: int64(a.Chunks), Unit: "chunks", Stage: "sleeping"})
	}
	run.SetResult(json.RawMessage(fmt.Sprintf(`{"chunks":%d}`, a.Chunks)))
	return nil
}

// Register adds the built-in tasks to reg.
func Register(reg *worker.Registry) {
	reg.MustRegister(DemoSleepTask, worker.Task{Handler: job.HandlerFunc(DemoSleep)})
}
