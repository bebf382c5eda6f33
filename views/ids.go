package views

import "strings"

// Swap targets. Every element the dashboard swaps (by htmx request, by a
// live SSE message or by the polling fallback) takes its id from here, and
// the live hub names its SSE events after the same ids, so the page, the
// fragment and the stream cannot drift apart.
const (
	IDQueues       = "queues-table"
	IDWorkers      = "workers-table"
	IDLocks        = "locks-table"
	IDStatusCounts = "status-counts"
	IDJobsTable    = "jobs-table"
	IDJobsNewer    = "jobs-newer" // "newer jobs match" notice of the list's first page
	IDBulk         = "bulk-panel"
	IDJobSummary   = "job-summary"
	IDTimeline     = "job-timeline"      // the <ol>: live events are appended to it
	IDTimelineWrap = "job-timeline-wrap" // its wrapper: replaced on resync and when polling
	IDTriggerForm  = "trigger-form"
	IDFlash        = "flash"
	IDLiveNotice   = "live-notice"
)

// Event names of live messages that are not an element id.
const (
	// EventTimelineAppend carries new timeline items (appended to IDTimeline).
	EventTimelineAppend = "timeline-append"
	// EventBye tells the page the server is going away (the browser then
	// reconnects, possibly to another replica).
	EventBye = "bye"
)

// JobRowID is the id of a job's row in the jobs list.
func JobRowID(jobID string) string { return "job-row-" + jobID }

// EventItemID is the id of a timeline item (the page drops duplicates by it).
func EventItemID(eventID int64) string { return "ev-" + itoa(eventID) }

// SelectID is the id of a row's selection checkbox (kept across live swaps).
func SelectID(jobID string) string { return "sel-" + jobID }

// FragmentURL is the URL that renders only region id of the page at pageURL
// (the polling fallback and resyncs fetch it).
func FragmentURL(pageURL, id string) string {
	sep := "?"
	if strings.Contains(pageURL, "?") {
		sep = "&"
	}
	return pageURL + sep + "fragment=" + id
}
