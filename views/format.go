package views

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// num renders a count with thousands separators: 1,234,567.
func num[T int | int64](n T) string {
	s := strconv.FormatInt(int64(n), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// iso is the machine-readable time of a <time> element (app.js reads it to
// keep relative times current).
func iso(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// exact is the full time shown in a title.
func exact(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000 UTC") }

// rel renders t relative to now: "12 s ago", "in 3 min".
func rel(now, t time.Time) string {
	d := now.Sub(t)
	if d >= 0 {
		if d < time.Second {
			return "just now"
		}
		return dur(d) + " ago"
	}
	if -d < time.Second {
		return "now"
	}
	return "in " + dur(-d)
}

// dur renders a duration compactly: 45 s, 3 min, 2 h 05 min, 3 d 4 h.
func dur(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h %02d min", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d d %d h", int(d.Hours())/24, int(d.Hours())%24)
}

// statusClass is the CSS class pair of a status badge.
func statusClass(st string) string { return "st st-" + st }

// shortID shortens a job id for tables: UUIDv7 ids share their leading
// timestamp digits, so the tail is what tells them apart.
func shortID(id string) string {
	if len(id) < 12 {
		return id
	}
	return "…" + id[len(id)-12:]
}

// JobURL is the detail page of a job.
func JobURL(id string) string { return "/jobs/" + url.PathEscape(id) }

// QueueActionURL is the pause or resume endpoint of a queue.
func QueueActionURL(queue, action string) string {
	return "/queues/" + url.PathEscape(queue) + "/" + action
}

func filterQuery(f JobsFilter) string {
	v := url.Values{}
	for _, kv := range [][2]string{{"queue", f.Queue}, {"status", f.Status}, {"task", f.Task}, {"lock_key", f.LockKey}, {"q", f.Text}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	return v.Encode()
}

// JobsURL is the jobs list with filter f and an optional cursor.
func JobsURL(f JobsFilter, cursor string) string {
	q := filterQuery(f)
	if cursor != "" {
		if q != "" {
			q += "&"
		}
		q += "before=" + url.QueryEscape(cursor)
	}
	if q == "" {
		return "/jobs"
	}
	return "/jobs?" + q
}

// countsURL links a status count to the list of those jobs.
func countsURL(queue, status string) string {
	return JobsURL(JobsFilter{Queue: queue, Status: status}, "")
}

// bar is one bar of the throughput chart, in SVG user units.
type bar struct {
	X, Y, H int
}

// Chart geometry: 60 bars of 2 units with no gap, 24 units high.
const (
	chartW, chartH, barW = 120, 24, 2
)

// bars scales per-minute counts to the chart; a minute with jobs gets at
// least one unit so that it never looks empty.
func bars(counts []int64) []bar {
	var top int64
	for _, n := range counts {
		top = max(top, n)
	}
	out := make([]bar, 0, len(counts))
	for i, n := range counts {
		if n == 0 || top == 0 {
			continue
		}
		h := int(max(1, n*chartH/top))
		out = append(out, bar{X: i * barW, Y: chartH - h, H: h})
	}
	return out
}

// perMinute summarizes a throughput series for its label: the mean of the
// complete minutes (all but the last).
func perMinute(counts []int64) string {
	if len(counts) < 2 {
		return "0/min"
	}
	var sum int64
	for _, n := range counts[:len(counts)-1] {
		sum += n
	}
	avg := float64(sum) / float64(len(counts)-1)
	if avg >= 10 || avg == 0 {
		return num(int64(avg+0.5)) + "/min"
	}
	return strconv.FormatFloat(avg, 'f', 1, 64) + "/min"
}

func sumOf(counts []int64) int64 {
	var s int64
	for _, n := range counts {
		s += n
	}
	return s
}

func pct(p ProgressView) string { return strconv.Itoa(p.Percent()) + "%" }

func progressText(p ProgressView) string {
	s := num(p.Done)
	if p.Total > 0 {
		s += " / " + num(p.Total)
	}
	if p.Unit != "" {
		s += " " + p.Unit
	}
	return s
}

func maxProgress(p ProgressView) string {
	if p.Total <= 0 {
		return "1"
	}
	return itoa(p.Total)
}

func valueProgress(p ProgressView) string {
	if p.Total <= 0 {
		return "0"
	}
	return itoa(min(p.Done, p.Total))
}

// truncate shortens s to n runes with an ellipsis.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func countsFragmentURL(queue string) string {
	return JobsURL(JobsFilter{Queue: queue}, "")
}

func emptyJobsText(v JobsView) string {
	switch {
	case v.Error != "":
		return "No jobs shown."
	case v.Filter.Text != "" && v.Next != "":
		return "No match among these jobs; older jobs are searched on the next page."
	case !v.Filter.Empty():
		return "No job matches the filter."
	}
	return "No jobs yet."
}

func bulkVerb(op string) string {
	if op == "retry" {
		return "Retry"
	}
	return "Cancel"
}

func bulkQuestion(v BulkView) string {
	which := "queued or running"
	if v.Op == "retry" {
		which = "failed, canceled or lost"
	}
	if v.Scope == "selected" {
		return bulkVerb(v.Op) + " " + num(v.N) + " selected " + plural(v.N, "job", "jobs") + "? Only " + which + " jobs are affected."
	}
	s := bulkVerb(v.Op) + " " + num(v.N) + " " + which + " " + plural(v.N, "job", "jobs") + " matching the filter"
	if v.Capped {
		s += " (the newest " + num(v.Cap) + "; more match: repeat to continue)"
	}
	return s + "?"
}

func bulkConfirmLabel(v BulkView) string {
	return bulkVerb(v.Op) + " " + num(v.N) + " " + plural(v.N, "job", "jobs")
}

func bulkNothingText(v BulkView) string {
	if v.Scope == "selected" && len(v.IDs) == 0 {
		return "Select jobs first (the boxes in the first column)."
	}
	if v.Op == "retry" {
		return "Nothing to retry: no failed, canceled or lost job matches."
	}
	return "Nothing to cancel: no queued or running job matches."
}

func bulkDoneText(v BulkView) string {
	past := "Canceled"
	if v.Op == "retry" {
		past = "Retried"
	}
	s := past + " " + num(v.Done.Changed) + " " + plural(v.Done.Changed, "job", "jobs") + "."
	if left := v.Done.Requested - v.Done.Changed - v.Done.Skipped; left > 0 {
		s += " " + num(left) + " had changed state meanwhile and were left alone."
	}
	if v.Done.Skipped > 0 {
		s += " " + num(v.Done.Skipped) + " were busy (being claimed or finished); try again."
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func searchNote(v JobsView) string {
	s := "Text searched in the " + num(v.Scanned) + " newest jobs matching the other filters"
	if v.Cursor != "" {
		s += " (older than the previous page)"
	}
	s += "."
	if v.Next != "" {
		s += " Older jobs are searched on the next page."
	}
	return s
}

func ariaInvalid(v TriggerView, field string) string {
	if v.Errors[field] != "" {
		return "true"
	}
	return "false"
}

func statusTitle(status int) string {
	switch status {
	case 404:
		return "Not found"
	case 400:
		return "Bad request"
	case 409:
		return "Conflict"
	}
	return "Something went wrong"
}

// topID is the newest job id on the page ("" when empty).
func topID(v JobsView) string {
	if len(v.Rows) == 0 {
		return ""
	}
	return v.Rows[0].ID
}

// minorStatus marks the statuses whose column a phone-width overview drops
// (what needs attention stays: queued, running, failed).
func minorStatus(st string) bool { return st == "succeeded" || st == "canceled" || st == "lost" }
