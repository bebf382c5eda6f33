package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/pgtest"
	"github.com/dataloader/dataloader/internal/store"
)

// seedJobs inserts jobs round-robin over queues a/b, tasks t1/t2/t3 and
// lock keys k0..k4, with args {"n": i} and job 7 holding a needle, and
// returns their ids oldest first.
func seedJobs(t *testing.T, s *store.Store, n int) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var ids []uuid.UUID
	for i := 0; i < n; i++ {
		args := fmt.Sprintf(`{"n": %d}`, i)
		if i == 7 {
			args = `{"n": 7, "note": "Needle_50%"}`
		}
		res, err := s.Trigger(ctx, job.TriggerParams{Queue: []string{"a", "b"}[i%2], Task: fmt.Sprintf("t%d", i%3+1),
			LockKey: fmt.Sprintf("k%d", i%5), Args: json.RawMessage(args)}, 60)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.JobID)
		time.Sleep(time.Millisecond) // distinct UUIDv7 milliseconds keep the order obvious
	}
	return ids
}

func TestListJobsFiltersAndPagesNewestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := store.New(pgtest.Pool(t))
	ids := seedJobs(t, s, 30)
	// Jobs 0, 2 and 4 run: the list indexes leave running jobs out, so
	// every filtered page must merge them back in, in order.
	claimed, err := s.Claim(ctx, "a", "w", 3)
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	running := func(i int) bool { return i == 0 || i == 2 || i == 4 }
	want := func(pred func(i int) bool) []uuid.UUID {
		var out []uuid.UUID
		for i := len(ids) - 1; i >= 0; i-- {
			if pred(i) {
				out = append(out, ids[i])
			}
		}
		return out
	}
	cases := []struct {
		name string
		f    store.JobFilter
		want []uuid.UUID
	}{
		{"no filter", store.JobFilter{}, want(func(int) bool { return true })},
		{"queue", store.JobFilter{Queue: "a"}, want(func(i int) bool { return i%2 == 0 })},
		{"task", store.JobFilter{Task: "t2"}, want(func(i int) bool { return i%3 == 1 })},
		{"lock key", store.JobFilter{LockKey: "k3"}, want(func(i int) bool { return i%5 == 3 })},
		{"queue and task", store.JobFilter{Queue: "b", Task: "t1"}, want(func(i int) bool { return i%2 == 1 && i%3 == 0 })},
		{"status", store.JobFilter{Status: job.StatusQueued, Queue: "a"}, want(func(i int) bool { return i%2 == 0 && !running(i) })},
		{"status running", store.JobFilter{Status: job.StatusRunning}, want(running)},
		{"queue and status running", store.JobFilter{Queue: "a", Status: job.StatusRunning}, want(running)},
		{"lock key with a running job", store.JobFilter{LockKey: "k0"}, want(func(i int) bool { return i%5 == 0 })},
		{"status none", store.JobFilter{Status: job.StatusFailed}, nil},
		{"status in", store.JobFilter{StatusIn: []job.Status{job.StatusQueued}}, want(func(i int) bool { return !running(i) })},
		{"status in with running", store.JobFilter{Queue: "a", StatusIn: []job.Status{job.StatusQueued, job.StatusRunning}},
			want(func(i int) bool { return i%2 == 0 })},
		{"text and queue", store.JobFilter{Queue: "a", Text: `"n": 2`}, []uuid.UUID{ids[28], ids[26], ids[24], ids[22], ids[20], ids[2]}},
		{"text literal percent", store.JobFilter{Text: "needle_50%"}, []uuid.UUID{ids[7]}},
		{"text no wildcard", store.JobFilter{Text: "needle_5_%"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []uuid.UUID
			f := tc.f
			f.Limit = 4
			for pages := 0; pages < 20; pages++ {
				p, err := s.ListJobs(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				for _, j := range p.Jobs {
					got = append(got, j.ID)
				}
				if p.Next == uuid.Nil {
					break
				}
				f.Before = p.Next
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %d jobs %v, want %d %v", len(got), got, len(tc.want), tc.want)
			}
		})
	}
}

func TestMatchingJobIDsIsCapped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := store.New(pgtest.Pool(t))
	ids := seedJobs(t, s, 12)
	got, err := s.MatchingJobIDs(ctx, store.JobFilter{Queue: "a"}, 4, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uuid.UUID{ids[10], ids[8], ids[6], ids[4]}; !slices.Equal(got, want) {
		t.Errorf("got %v, want the 4 newest of queue a %v", got, want)
	}
	got, err = s.MatchingJobIDs(ctx, store.JobFilter{Text: `"n": 1`}, 100, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uuid.UUID{ids[11], ids[10], ids[1]}; !slices.Equal(got, want) {
		t.Errorf("text match: got %v, want %v", got, want)
	}
}

func TestCancelManyAndRetryManyWriteEventsAndSkipFinished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	s := store.New(pool)
	ids := seedJobs(t, s, 6)
	// Job 0 runs; job 1 has succeeded.
	claimed, err := s.Claim(ctx, "a", "w1", 1)
	if err != nil || len(claimed) != 1 || claimed[0].ID != ids[0] {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	c1, err := s.Claim(ctx, "b", "w1", 1)
	if err != nil || len(c1) != 1 {
		t.Fatalf("claim b: %v %v", c1, err)
	}
	if _, err := s.FinishMany(ctx, "w1", []store.Finish{{Attempt: store.Attempt{JobID: c1[0].ID, Attempt: 1}, Outcome: store.OutcomeSucceeded}}); err != nil {
		t.Fatal(err)
	}

	res, err := s.CancelMany(ctx, ids, "user:op")
	if err != nil {
		t.Fatal(err)
	}
	if res.Requested != 6 || res.Changed != 5 || res.Skipped != 0 {
		t.Errorf("cancel: got %+v, want 6 requested, 5 changed (the succeeded one left alone)", res)
	}
	jobs, err := s.JobsByIDs(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		want := job.StatusCanceled
		switch j.ID {
		case ids[0]:
			want = job.StatusRunning // flagged; its worker finishes it as canceled
			if !j.CancelRequested {
				t.Errorf("running job: cancel_requested false, want true")
			}
		case c1[0].ID:
			want = job.StatusSucceeded
		}
		if j.Status != want {
			t.Errorf("job %s: got %s, want %s", j.ID, j.Status, want)
		}
	}
	evs, err := s.EventsTail(ctx, ids[2], 0, 10)
	if err != nil || len(evs) != 2 || evs[1].Kind != job.EventCanceled {
		t.Fatalf("events of a bulk-canceled job: %+v %v, want queued then canceled", evs, err)
	}

	res, err = s.RetryMany(ctx, ids, "user:op")
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed != 4 {
		t.Errorf("retry: got %+v, want the 4 canceled jobs retried", res)
	}
	evs, err = s.EventsAfterMany(ctx, []uuid.UUID{ids[2], ids[3]}, []int64{evs[1].ID, 0}, 10)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.JobID.String()[:0]+e.Kind)
	}
	if want := []string{"retried", "queued", "canceled", "retried"}; !slices.Equal(kinds, want) {
		t.Errorf("events after cursors: got %v, want %v", kinds, want)
	}
}

func TestWaitFactsExplainAWaitingJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := store.New(pgtest.Pool(t))
	trigger := func(lockKey string) job.Job {
		res, err := s.Trigger(ctx, job.TriggerParams{Queue: "q", Task: "t", LockKey: lockKey}, 60)
		if err != nil {
			t.Fatal(err)
		}
		j, err := s.Get(ctx, res.JobID)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	holder := trigger("k")
	if _, err := s.Claim(ctx, "q", "w", 1); err != nil {
		t.Fatal(err)
	}
	second, third := trigger("k"), trigger("k")
	other := trigger("other")
	if err := s.SetQueuePaused(ctx, "q", true, "test"); err != nil {
		t.Fatal(err)
	}
	f, err := s.WaitFacts(ctx, third, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := store.WaitFacts{QueuePaused: true, Holder: holder.ID, Earlier: second.ID, Ahead: 1, Workers: 0}
	if f != want {
		t.Errorf("got %+v, want %+v", f, want)
	}
	f, err = s.WaitFacts(ctx, other, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if f.Holder != uuid.Nil || f.Earlier != uuid.Nil || f.Ahead != 2 {
		t.Errorf("other key: got %+v, want no holder, no earlier, 2 ahead", f)
	}
	locks, err := s.Locks(ctx, 10, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) != 1 || locks[0].Key != "k" || locks[0].Waiting != 2 || len(locks[0].Waiters) != 2 ||
		locks[0].Waiters[0].JobID != second.ID || locks[0].Holders[0].JobID != holder.ID {
		t.Errorf("locks: got %+v, want k held by the first job with the 2 others waiting in order", locks)
	}
}

func TestCountsOldestAndThroughput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := store.New(pgtest.Pool(t))
	seedJobs(t, s, 5)
	c, err := s.Claim(ctx, "a", "w", 1)
	if err != nil || len(c) != 1 {
		t.Fatal(c, err)
	}
	if _, err := s.FinishMany(ctx, "w", []store.Finish{{Attempt: store.Attempt{JobID: c[0].ID, Attempt: 1}, Outcome: store.OutcomeSucceeded}}); err != nil {
		t.Fatal(err)
	}
	counts, err := s.CountByQueueStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, qc := range counts {
		got[qc.Queue+"/"+string(qc.Status)] = qc.N
	}
	if want := map[string]int64{"a/queued": 2, "a/succeeded": 1, "b/queued": 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts: got %v, want %v", got, want)
	}
	oldest, err := s.OldestQueued(ctx, []string{"a", "b", "none"})
	if err != nil || len(oldest) != 2 {
		t.Fatalf("oldest: got %v %v, want a and b", oldest, err)
	}
	now := time.Now()
	per, err := s.FinishedPerMinute(ctx, now.Add(-time.Hour), now.Add(time.Minute))
	if err != nil || len(per) != 1 || per[0].Queue != "a" || per[0].N != 1 {
		t.Errorf("throughput: got %+v %v, want one job of a", per, err)
	}
}
