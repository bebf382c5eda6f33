package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataloader/dataloader/internal/store"
)

const scaleWorker = "bench-scale"

// runScale times Store.Claim(10) followed by FinishMany(succeeded) with
// growing backlogs, so the claim keeps walking the queue past the rows it
// finished, and prints one claim's plan at the largest size.
func runScale(ctx context.Context, b *bench) error {
	sizes, err := parseSizes(b.o.scaleSizes)
	if err != nil {
		return err
	}
	dsn, err := b.database(ctx, "scale")
	if err != nil {
		return err
	}
	st, err := b.openWorker(ctx, dsn, b.o.pool)
	if err != nil {
		return err
	}
	pool := st.Pool()
	defer pool.Close()

	p50 := map[int]time.Duration{}
	p99 := map[int]time.Duration{}
	for i, n := range sizes {
		if _, err := pool.Exec(ctx, "TRUNCATE dl_jobs, dl_job_events"); err != nil {
			return err
		}
		var took time.Duration
		switch b.o.scaleFill {
		case "copy":
			took, err = copyJobs(ctx, pool, n, 10_000)
		case "trigger":
			took, err = triggerMany(ctx, st, n, 10_000, 0)
		default:
			return fmt.Errorf("-scale-fill %q: want copy or trigger", b.o.scaleFill)
		}
		if err != nil {
			return err
		}
		vac, err := vacuumAnalyze(ctx, pool)
		if err != nil {
			return err
		}
		l := label(n)
		note("%s: filled %d queued jobs (%s, 10k per statement) in %s (%.0f jobs/s), VACUUM ANALYZE %s; %s", l, n,
			b.o.scaleFill, took.Round(time.Millisecond), float64(n)/took.Seconds(), vac.Round(time.Millisecond), sizesOf(ctx, pool))
		for range 10 { // warm-up: prepared statements, caches
			if _, err := claimFinish(ctx, st); err != nil {
				return err
			}
		}
		claims := make([]time.Duration, 0, b.o.scaleIters)
		finishes := make([]time.Duration, 0, b.o.scaleIters)
		short := 0
		for range b.o.scaleIters {
			t, err := claimFinish(ctx, st)
			if err != nil {
				return err
			}
			claims, finishes = append(claims, t.claim), append(finishes, t.finish)
			if t.n < 10 {
				short++
			}
		}
		if short > 0 {
			note("WARNING: %d claims returned fewer than 10 jobs", short)
		}
		p50[n], p99[n] = percentile(claims, 0.5), percentile(claims, 0.99)
		figure("scale_claim_"+l+"_p50_ms", ms(p50[n]), "ms")
		figure("scale_claim_"+l+"_p99_ms", ms(p99[n]), "ms")
		note("%s: %d iterations of Claim(10) then FinishMany(10 succeeded); claim %s; finish %s", l, len(claims),
			durSummary(claims), durSummary(finishes))
		if i == len(sizes)-1 && b.o.scaleExplain {
			if err := explainClaim(ctx, dsn); err != nil {
				note("explain failed: %v", err)
			}
		}
	}
	if first, last := sizes[0], sizes[len(sizes)-1]; len(sizes) > 1 && p50[first] > 0 {
		figure(fmt.Sprintf("scale_claim_%s_over_%s", label(last), label(first)), float64(p50[last])/float64(p50[first]), "x")
		note("p50 ratio above; p99 ratio %.2fx", float64(p99[last])/float64(max(p99[first], 1)))
	}
	return nil
}

type claimTiming struct {
	claim, finish time.Duration
	n             int
}

// claimFinish claims up to 10 jobs as scaleWorker and marks them succeeded.
func claimFinish(ctx context.Context, st *store.Store) (claimTiming, error) {
	t0 := time.Now()
	claimed, err := st.Claim(ctx, benchQueue, scaleWorker, 10)
	if err != nil {
		return claimTiming{}, err
	}
	t1 := time.Now()
	fs := make([]store.Finish, len(claimed))
	for i, c := range claimed {
		fs[i] = store.Finish{Attempt: store.Attempt{JobID: c.ID, Attempt: c.Attempt}, Outcome: store.OutcomeSucceeded}
	}
	if _, err := st.FinishMany(ctx, scaleWorker, fs); err != nil {
		return claimTiming{}, err
	}
	return claimTiming{claim: t1.Sub(t0), finish: time.Since(t1), n: len(claimed)}, nil
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-scale-sizes: %q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// label names a size: 10000 → 10k, 1000000 → 1m.
func label(n int) string {
	switch {
	case n%1_000_000 == 0:
		return fmt.Sprintf("%dm", n/1_000_000)
	case n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}

// sizesOf describes the jobs table and the claim index on disk.
func sizesOf(ctx context.Context, pool *pgxpool.Pool) string {
	var table, claimIdx string
	err := pool.QueryRow(ctx, `SELECT pg_size_pretty(pg_total_relation_size('dl_jobs')),
		pg_size_pretty(pg_relation_size('ix_dl_jobs_claim_order'))`).Scan(&table, &claimIdx)
	if err != nil {
		return ""
	}
	return "dl_jobs with indexes " + table + ", ix_dl_jobs_claim_order " + claimIdx
}
