package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dataloader/dataloader/internal/job"
)

// fakeRun is a Run over fixed args, for the decoding helpers.
type fakeRun struct{ args string }

func (f fakeRun) Job() job.Claimed                       { return job.Claimed{Args: json.RawMessage(f.args)} }
func (fakeRun) Progress(job.Progress)                    {}
func (fakeRun) SetResult(json.RawMessage)                {}
func (fakeRun) Checkpoint(context.Context, any) error    { return nil }
func (fakeRun) Event(context.Context, string, any) error { return nil }

type loadArgs struct {
	Table string `json:"table"`
	Rows  int    `json:"rows"`
	Opts  struct {
		Chunk int `json:"chunk"`
	} `json:"opts"`
}

func (a *loadArgs) Validate() error {
	if a.Table == "" {
		return job.Invalid("args.table", "is required")
	}
	return nil
}

func TestArgsDecodesStrictlyAndNamesTheField(t *testing.T) {
	a, err := job.Args[loadArgs](fakeRun{`{"table":"t","rows":3,"opts":{"chunk":5}}`})
	if err != nil || a.Table != "t" || a.Rows != 3 || a.Opts.Chunk != 5 {
		t.Fatalf("got %+v, %v; want decoded args", a, err)
	}
	for _, tc := range []struct{ args, field string }{
		{`{"table":"t","rowz":3}`, "args.rowz"},
		{`{"table":"t","rows":"three"}`, "args.rows"},
		{`{"table":"t","opts":{"chunk":"x"}}`, "args.opts.chunk"},
		{`{"table":"t"} {"again":1}`, "args"},
		{`{"rows":1}`, "args.table"}, // Validate
		{`{"table":`, "args"},
	} {
		_, err := job.Args[loadArgs](fakeRun{tc.args})
		if !job.IsPermanent(err) {
			t.Errorf("%s: got %v, want a permanent error", tc.args, err)
			continue
		}
		var je *job.Error
		if !errors.As(err, &je) || je.Field != tc.field {
			t.Errorf("%s: got field %q (%v), want %q", tc.args, je.Field, err, tc.field)
		}
	}
	if _, err := job.Args[map[string]any](fakeRun{""}); err != nil {
		t.Errorf("empty args: got %v, want nil", err)
	}
}

func TestDecodeArgsKeepsDefaults(t *testing.T) {
	a := loadArgs{Table: "default", Rows: 7}
	if err := job.DecodeArgs(json.RawMessage(`{"rows":9}`), &a); err != nil || a.Table != "default" || a.Rows != 9 {
		t.Fatalf("got %+v, %v; want table kept, rows 9", a, err)
	}
}

func TestRetryAfterCarriesTheDelay(t *testing.T) {
	err := job.RetryAfter(errors.New("HTTP 429"), 2*time.Second)
	if d, ok := job.RetryDelay(err); !ok || d != 2*time.Second {
		t.Fatalf("got %v, %v; want 2s", d, ok)
	}
	wrapped := job.Permanent(err)
	if !job.IsPermanent(wrapped) || !strings.Contains(wrapped.Error(), "429") {
		t.Fatalf("got %v; want permanent wrapping kept", wrapped)
	}
	if _, ok := job.RetryDelay(errors.New("plain")); ok {
		t.Fatal("a plain error carries no delay")
	}
	if job.RetryAfter(nil, time.Second) != nil {
		t.Fatal("RetryAfter(nil) must be nil")
	}
}
