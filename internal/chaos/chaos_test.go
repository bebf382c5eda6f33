package chaos_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dataloader/dataloader/internal/pgcluster"
	"github.com/dataloader/dataloader/internal/pgtest"
)

func TestSIGTERMWith200JobsInFlightHandsThemToAnotherReplica(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	d := openDB(t, dsn)
	a := startReplica(t, dsn, "DL_SHUTDOWN_GRACE_SEC=1", `WORKERS_JSON=[{"queue":"chaos","concurrency":200}]`)
	d.enqueue(200, 200, 4000) // each job outlasts the grace period
	d.waitFor("200 jobs running", 30*time.Second, func() bool {
		return d.count(`SELECT count(*) FROM dl_jobs WHERE status = 'running'`) == 200
	})
	err, took := a.terminate(15 * time.Second)
	if err != nil {
		t.Fatalf("exit: %v, want code 0\n%s", err, a.logs())
	}
	if took > 4*time.Second {
		t.Errorf("exit took %v, want the 1 s grace plus a small margin", took)
	}
	if n := d.count(`SELECT count(*) FROM dl_jobs WHERE status = 'queued' AND attempt = 0`); n != 200 {
		t.Fatalf("after SIGTERM: %d jobs queued with attempt 0, want 200 (statuses %v)", n, d.statuses())
	}
	startReplica(t, dsn, `WORKERS_JSON=[{"queue":"chaos","concurrency":200}]`)
	d.waitFor("all jobs succeeded", 60*time.Second, func() bool {
		return d.count(`SELECT count(*) FROM dl_jobs WHERE status = 'succeeded'`) == 200
	})
	d.checkOutcome(200)
	if n := d.count(`SELECT count(*) FROM dl_jobs WHERE attempt <> 1`); n != 0 {
		t.Errorf("%d jobs were charged an attempt for the hand-back", n)
	}
	if n := d.count(`SELECT count(*) FROM dl_job_events WHERE kind = 'requeue' AND payload->>'reason' = 'shutdown'`); n != 200 {
		t.Errorf("got %d requeue/shutdown events, want 200", n)
	}
}

func TestKill9ReplicaJobsComeBackWithinLeaseAndReaperPeriod(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	d := openDB(t, dsn)
	a := startReplica(t, dsn)
	d.enqueue(60, 10, 1500)
	d.waitFor("the victim running jobs", 30*time.Second, func() bool {
		return d.count(`SELECT count(*) FROM dl_jobs WHERE status = 'running'`) >= 10
	})
	startReplica(t, dsn) // the survivor; started after, so the victim holds the first jobs
	var victim string
	if err := d.pool.QueryRow(context.Background(), `SELECT worker_id FROM dl_jobs WHERE status = 'running' LIMIT 1`).Scan(&victim); err != nil {
		t.Fatal(err)
	}
	held := d.count(`SELECT count(*) FROM dl_jobs WHERE status = 'running' AND worker_id = $1`, victim)
	killed := time.Now()
	a.kill()
	// Lease TTL 3 s + reaper period 1 s: the survivor re-runs the victim's jobs.
	d.waitFor("the victim's jobs to be taken back", 10*time.Second, func() bool {
		return d.count(`SELECT count(*) FROM dl_jobs WHERE status = 'running' AND worker_id = $1`, victim) == 0
	})
	if back := time.Since(killed); back > 3*time.Second+1*time.Second+2*time.Second {
		t.Errorf("jobs came back after %v, want within lease TTL + reaper period (+ margin)", back)
	}
	d.waitFor("all jobs succeeded", 60*time.Second, func() bool {
		return d.count(`SELECT count(*) FROM dl_jobs WHERE status = 'succeeded'`) == 60
	})
	d.checkOutcome(60)
	if held == 0 {
		t.Error("the killed replica held no job: the test proved nothing")
	}
	if n := d.count(`SELECT count(*) FROM dl_job_events WHERE kind = 'reaped'`); n < held {
		t.Errorf("got %d reaped events, want at least the %d jobs the victim held", n, held)
	}
}

func TestThreeReplicasSurviveRandomKillsAndAPostgresRestart(t *testing.T) {
	t.Parallel()
	// A cluster of its own: it is restarted under the replicas.
	dir, err := os.MkdirTemp("", "dl-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o755)
	opts := pgcluster.Options{DataDir: filepath.Join(dir, "pg"), Database: "chaos", Logger: quietLogger(),
		Settings: map[string]string{"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}}
	ctx := context.Background()
	cluster, err := pgcluster.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop(ctx) })
	dsn := cluster.DSN("chaos")
	migrate(t, dsn)
	d := openDB(t, dsn)
	const jobs = 10000
	d.enqueue(jobs, 200, 5)

	env := `WORKERS_JSON=[{"queue":"chaos","concurrency":16}]`
	replicas := []*replica{startReplica(t, dsn, env), startReplica(t, dsn, env), startReplica(t, dsn, env)}
	restarted := false
	deadline := time.Now().Add(4 * time.Minute)
	for round := 0; d.count(`SELECT count(*) FROM dl_jobs WHERE status = 'succeeded'`) < jobs; round++ {
		if time.Now().After(deadline) {
			t.Fatalf("not done after 4 minutes: %v", d.statuses())
		}
		time.Sleep(time.Duration(700+rand.IntN(800)) * time.Millisecond)
		done := d.count(`SELECT count(*) FROM dl_jobs WHERE status = 'succeeded'`)
		switch {
		case !restarted && done > jobs/2:
			restarted = true
			if err := cluster.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond)
			if cluster, err = pgcluster.Start(ctx, opts); err != nil {
				t.Fatal(err)
			}
		case done < jobs*9/10:
			i := rand.IntN(len(replicas))
			replicas[i].kill()
			replicas[i] = startReplica(t, dsn, env)
		}
	}
	if !restarted {
		t.Error("PostgreSQL was never restarted: the test proved less than it claims")
	}
	d.checkOutcome(jobs)
	if n := d.count(`SELECT count(*) FROM (SELECT job_id FROM chaos_runs GROUP BY job_id HAVING count(*) > 1) r`); n == 0 {
		t.Log("no job ran twice: the kills hit no running job")
	}
}

func TestTriggerDuringDrainIs503AndHealthTurnsNotReadyFirst(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	d := openDB(t, dsn)
	token := d.operatorToken()
	r := startReplica(t, dsn, "DL_SHUTDOWN_GRACE_SEC=3")
	d.enqueue(1, 1, 2500)
	d.waitFor("the job running", 10*time.Second, func() bool {
		return d.count(`SELECT count(*) FROM dl_jobs WHERE status = 'running'`) == 1
	})
	_ = r.cmd.Process.Signal(syscallTERM)
	time.Sleep(200 * time.Millisecond)
	res, err := http.Get("http://" + r.addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/health during drain: got %d, want 503", res.StatusCode)
	}
	res = post(t, "http://"+r.addr+"/api/v1/jobs/trigger", token, "application/json",
		strings.NewReader(`{"queue":"chaos","task":"chaos.record","lock_key":"late"}`))
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Errorf("trigger during drain: got %d Retry-After %q, want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	if err := <-r.exited; err != nil {
		t.Errorf("exit: %v", err)
	}
	if n := d.count(`SELECT count(*) FROM dl_jobs WHERE status = 'succeeded'`); n != 1 {
		t.Errorf("the running job did not finish within the grace period")
	}
}

func TestImportInterruptedBySIGTERMAcksExactlyWhatItStoredAndResendIsSafe(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	d := openDB(t, dsn)
	const lines = 10000
	var file strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&file, `{"queue":"imp","task":"t","lock_key":"k%d","idempotency_key":"line-%d"}`+"\n", i, i)
	}
	r := startReplica(t, dsn, `WORKERS_JSON=[]`)

	pr, pw := io.Pipe()
	go func() { // send slowly enough that SIGTERM lands mid-stream
		data := []byte(file.String())
		for len(data) > 0 {
			n := min(len(data), 16<<10)
			if _, err := pw.Write(data[:n]); err != nil {
				return
			}
			data = data[n:]
			time.Sleep(5 * time.Millisecond)
		}
		pw.Close()
	}()
	token := d.operatorToken()
	res := post(t, "http://"+r.addr+"/api/v1/jobs/import", token, "application/x-ndjson", pr)
	acked := map[string]bool{}
	var summary struct {
		Lines          int  `json:"lines"`
		Complete       bool `json:"complete"`
		ResumeFromLine int  `json:"resume_from_line"`
	}
	sc := bufio.NewScanner(res.Body)
	signalled := false
	for sc.Scan() {
		var m struct {
			Line    int
			JobID   string `json:"job_id"`
			Summary *json.RawMessage
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if m.Summary != nil {
			_ = json.Unmarshal(*m.Summary, &summary)
			break
		}
		acked[fmt.Sprintf("line-%d", m.Line)] = true
		if !signalled && len(acked) >= 1000 {
			signalled = true
			_ = r.cmd.Process.Signal(syscallTERM)
		}
	}
	res.Body.Close()
	pw.CloseWithError(io.ErrClosedPipe)
	if err := <-r.exited; err != nil {
		t.Fatalf("exit: %v\n%s", err, r.logs())
	}
	if summary.Complete || summary.Lines != len(acked) || summary.ResumeFromLine != len(acked)+1 || len(acked) >= lines {
		t.Fatalf("summary %+v with %d acked lines: want incomplete, resuming right after the last ack", summary, len(acked))
	}
	stored := d.count(`SELECT count(*) FROM dl_jobs`)
	if stored != len(acked) {
		t.Errorf("%d rows stored, %d lines acked: want equal (acked ⇔ stored)", stored, len(acked))
	}
	if n := d.count(`SELECT count(*) FROM dl_jobs WHERE NOT (idempotency_key = ANY($1))`, keys(acked)); n != 0 {
		t.Errorf("%d stored jobs were never acked", n)
	}

	// Resend the whole file to another replica: nothing is duplicated.
	r2 := startReplica(t, dsn, `WORKERS_JSON=[]`)
	res = post(t, "http://"+r2.addr+"/api/v1/jobs/import", token, "application/x-ndjson", strings.NewReader(file.String()))
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if n := d.count(`SELECT count(*) FROM dl_jobs`); n != lines {
		t.Errorf("after resending: %d rows, want %d", n, lines)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
