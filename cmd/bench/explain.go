package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataloader/dataloader/internal/store"
)

// explainRuns is how many claims go through the explaining session: pgx
// prepares the statement, and after five executions PostgreSQL may switch to
// a generic plan, which is what a long-running worker uses.
const explainRuns = 6

// explainClaim runs the real Store.Claim (then FinishMany) on a one-connection
// pool whose session has auto_explain loaded with ANALYZE and BUFFERS, and
// prints the plan of the last run as context lines. auto_explain sends the
// plan to the client as a LOG notice, so no server log is needed.
func explainClaim(ctx context.Context, dsn string) error {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var plans []string
	cfg.MaxConns = 1
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "JobClaim") {
			mu.Lock()
			plans = append(plans, n.Message)
			mu.Unlock()
		}
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		for _, s := range []string{"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
			"SET auto_explain.log_analyze = on", "SET auto_explain.log_buffers = on", "SET client_min_messages = log"} {
			if _, err := c.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(pool)
	for range explainRuns {
		if _, err := claimFinish(ctx, st); err != nil {
			return err
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(plans) == 0 {
		return fmt.Errorf("auto_explain sent no plan")
	}
	last := planLines(plans[len(plans)-1])
	kind := "same plan shape as the first execution"
	if shape(planLines(plans[0])) != shape(last) {
		kind = "plan shape differs from the first execution's"
	}
	note("EXPLAIN (ANALYZE, BUFFERS) of Store.Claim(10) at the largest size, execution %d of the prepared statement via auto_explain (%s):", len(plans), kind)
	for _, l := range last {
		note("  %s", l)
	}
	return nil
}

var planStart = regexp.MustCompile(`\(cost=|\(actual `)

// planLines drops auto_explain's header and query text, keeping the plan.
func planLines(msg string) []string {
	lines := strings.Split(msg, "\n")
	for i, l := range lines {
		if planStart.MatchString(l) {
			return lines[i:]
		}
	}
	return lines
}

// shape is a plan's node lines without their figures, to compare plans.
func shape(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		if node, _, ok := strings.Cut(l, "(cost="); ok {
			b.WriteString(strings.TrimSpace(node))
			b.WriteByte('\n')
		}
	}
	return b.String()
}
