package web_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

type importResult struct {
	acks    []map[string]any
	summary map[string]any
}

// postImport sends body to the import endpoint and reads every line back.
func (e *apiEnv) postImport(body io.Reader) importResult {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.ts.URL+"/api/v1/jobs/import", body)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	e.authorize(req)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		e.t.Fatalf("import: %d %s", res.StatusCode, b)
	}
	var out importResult
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			e.t.Fatalf("ack line %q: %v", sc.Text(), err)
		}
		if s, ok := m["summary"].(map[string]any); ok {
			out.summary = s
			continue
		}
		out.acks = append(out.acks, m)
	}
	return out
}

func TestImportAcksEveryLineInOrderAfterCommit(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	body := strings.Join([]string{
		`{"queue":"imp","task":"t","lock_key":"a","idempotency_key":"k1"}`,
		`{"queue":"imp","task":"t"}`,
		`not json`,
		`{"queue":"imp","task":"t","lock_key":"b","idempotency_key":"k1"}`,
		``,
		`{"queue":"imp","task":"t","lock_key":"c","args":{"n":1},"priority":5}`,
	}, "\n") + "\n"
	r := e.postImport(strings.NewReader(body))
	if len(r.acks) != 6 {
		t.Fatalf("got %d acks, want 6: %v", len(r.acks), r.acks)
	}
	for i, a := range r.acks {
		if int(a["line"].(float64)) != i+1 {
			t.Errorf("ack %d is for line %v", i, a["line"])
		}
	}
	if r.acks[0]["created"] != true || r.acks[3]["created"] != false || r.acks[3]["job_id"] != r.acks[0]["job_id"] {
		t.Errorf("duplicate idempotency key: got %v and %v, want the same job, created then not", r.acks[0], r.acks[3])
	}
	if errField(r.acks[1]) != "lock_key" || errField(r.acks[2]) != "" || r.acks[2]["error"] == nil || r.acks[4]["error"] == nil {
		t.Errorf("bad lines: got %v %v %v, want errors (field lock_key for line 2)", r.acks[1], r.acks[2], r.acks[4])
	}
	want := map[string]any{"lines": 6.0, "created": 2.0, "existing": 1.0, "failed": 3.0, "complete": true}
	for k, v := range want {
		if r.summary[k] != v {
			t.Errorf("summary %s: got %v, want %v (%v)", k, r.summary[k], v, r.summary)
		}
	}
	var n int
	if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM dl_jobs WHERE queue = 'imp'`).Scan(&n); err != nil || n != 2 {
		t.Errorf("got %d rows (%v), want 2", n, err)
	}
}

func TestImportResendCreatesNoDuplicates(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	var b strings.Builder
	for i := 0; i < 2500; i++ {
		fmt.Fprintf(&b, `{"queue":"imp","task":"t","lock_key":"k%d","idempotency_key":"line-%d"}`+"\n", i, i)
	}
	first := e.postImport(strings.NewReader(b.String()))
	second := e.postImport(strings.NewReader(b.String()))
	if first.summary["created"] != 2500.0 || second.summary["existing"] != 2500.0 || second.summary["created"] != 0.0 {
		t.Fatalf("got summaries %v then %v, want 2500 created then 2500 existing", first.summary, second.summary)
	}
	for i := range first.acks {
		if first.acks[i]["job_id"] != second.acks[i]["job_id"] {
			t.Fatalf("line %d: job %v then %v", i+1, first.acks[i]["job_id"], second.acks[i]["job_id"])
		}
	}
}

func TestImportDuringDrainIs503(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.srv.SetReady(false)
	req, _ := http.NewRequest(http.MethodPost, e.ts.URL+"/api/v1/jobs/import", strings.NewReader("{}\n"))
	e.authorize(req)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Errorf("got %d Retry-After %q, want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
}

func errField(ack map[string]any) string {
	e, _ := ack["error"].(map[string]any)
	f, _ := e["field"].(string)
	return f
}
