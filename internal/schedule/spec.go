// Package schedule enqueues periodic jobs. Schedules come from
// configuration (DL_SCHEDULES_JSON) with cron syntax (robfig/cron/v3: five
// fields, an optional leading seconds field, descriptors such as @hourly,
// and a CRON_TZ= prefix; times are UTC otherwise).
//
// Every replica runs every schedule. Exactly one job per tick comes from the
// database, not from coordination: the job of a tick has the idempotency key
// "schedule:<name>:<tick, RFC 3339 UTC>", so the replicas' inserts race
// harmlessly. dl_schedules records each schedule's last and next tick for
// the dashboard.
package schedule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/robfig/cron/v3"

	"github.com/dataloader/dataloader/internal/job"
)

// Spec is one schedule: every tick of Cron enqueues a job of Task on Queue
// with Args.
type Spec struct {
	Name  string          `json:"name"`
	Cron  string          `json:"cron"`
	Queue string          `json:"queue"`
	Task  string          `json:"task"`
	Args  json.RawMessage `json:"args,omitempty"`
	// LockKey serializes the schedule's jobs (one runs at a time);
	// default "schedule:<name>".
	LockKey string `json:"lock_key,omitempty"`
	// MaxAttempts and LeaseTTLSec of the jobs; 0 takes the defaults.
	MaxAttempts int `json:"max_attempts,omitempty"`
	LeaseTTLSec int `json:"lease_ttl_sec,omitempty"`

	sched cron.Schedule
}

// parser accepts standard five-field specs, an optional seconds field in
// front, and descriptors (@daily, @every 1h30m).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse reads a JSON array of schedules and validates each; errors name the
// schedule and the field. An empty text is no schedules.
func Parse(text string) ([]Spec, error) {
	if len(bytes.TrimSpace([]byte(text))) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.DisallowUnknownFields()
	var specs []Spec
	if err := dec.Decode(&specs); err != nil {
		return nil, fmt.Errorf("must be a JSON array of {name, cron, queue, task, args, lock_key}: %w", err)
	}
	seen := map[string]bool{}
	var errs []error
	for i := range specs {
		s := &specs[i]
		if err := s.validate(); err != nil {
			errs = append(errs, fmt.Errorf("schedule %d (%q): %w", i+1, s.Name, err))
			continue
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("schedule %d: name %q appears twice", i+1, s.Name))
		}
		seen[s.Name] = true
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return specs, nil
}

// validate checks the spec and compiles its cron expression.
func (s *Spec) validate() error {
	if s.Name == "" {
		return job.Invalid("name", "is required")
	}
	if err := job.ValidText("name", s.Name, job.MaxNameLen); err != nil {
		return err
	}
	sched, err := parser.Parse(s.Cron)
	if err != nil {
		return job.Invalid("cron", "%v", err)
	}
	s.sched = sched
	if s.LockKey == "" {
		s.LockKey = "schedule:" + s.Name
	}
	p := s.trigger()
	return p.Validate()
}

// trigger is the job of a tick, without its idempotency key.
func (s *Spec) trigger() job.TriggerParams {
	p := job.TriggerParams{Queue: s.Queue, Task: s.Task, Args: s.Args, LockKey: s.LockKey}
	if s.MaxAttempts != 0 {
		p.MaxAttempts = &s.MaxAttempts
	}
	if s.LeaseTTLSec != 0 {
		p.LeaseTTLSec = &s.LeaseTTLSec
	}
	return p
}
