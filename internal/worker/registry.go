// Package worker runs jobs: a Manager claims jobs for the queues of
// WORKERS_JSON, holds each job's lock_key advisory lock while it runs, keeps
// its lease alive, pushes cancellation into the handler's context, records
// outcomes in batches, and on shutdown hands unfinished jobs back.
package worker

import (
	"fmt"
	"sort"
	"sync"

	"github.com/dataloader/dataloader/internal/job"
)

// Task is a registered handler with its retry policy.
type Task struct {
	Handler job.Handler
	// Retry is the backoff between failed attempts; nil means job.DefaultRetry.
	Retry job.RetryPolicy
}

// Registry maps task names to handlers. It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tasks map[string]Task
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{tasks: map[string]Task{}} }

// Register adds a task; registering a name twice is an error.
func (r *Registry) Register(name string, t Task) error {
	if name == "" || t.Handler == nil {
		return fmt.Errorf("register task %q: name and handler are required", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tasks[name]; dup {
		return fmt.Errorf("register task %q: already registered", name)
	}
	r.tasks[name] = t
	return nil
}

// MustRegister is Register for program start-up, where a duplicate is a bug.
func (r *Registry) MustRegister(name string, t Task) {
	if err := r.Register(name, t); err != nil {
		panic(err)
	}
}

// Lookup returns the task registered under name.
func (r *Registry) Lookup(name string) (Task, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tasks[name]
	return t, ok
}

// Names lists the registered task names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.tasks))
	for n := range r.tasks {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
