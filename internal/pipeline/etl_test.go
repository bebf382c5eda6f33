package pipeline_test

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/pgtest"
	"github.com/dataloader/dataloader/internal/pipeline"
)

const etlRows = 100_000

// writeItemsCSV writes n item rows; version changes every qty and date.
func writeItemsCSV(t *testing.T, path string, header string, n, version int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, header)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(w, "%d,item %d,%d,%d.%02d,2026-11-%02dT10:00:00Z\n", i, i, i%1000+version, i%500, i%100, version+1)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func (e *env) createItems(table string) {
	e.exec(`CREATE TABLE ` + table + ` (id bigint PRIMARY KEY, name text NOT NULL, qty int NOT NULL,
		price numeric(12,2), updated_at timestamptz)`)
}

func etlJob(args pipeline.ETLArgs) job.TriggerParams {
	return job.TriggerParams{Queue: "etl", Task: pipeline.ETLTask, Args: jsonArgs(args), LockKey: "etl:" + args.Table}
}

func TestETLLoadsEveryRowOnceAndARerunUpdatesInPlace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createItems("public.items")
	writeItemsCSV(t, filepath.Join(e.dir, "items.csv"), "id,name,qty,price,updated_at", etlRows, 0)
	e.startManager("etl", 1)

	start := time.Now()
	id := e.trigger(etlJob(pipeline.ETLArgs{Source: "items.csv", Table: "public.items", Keys: []string{"id"}}))
	j := e.waitStatus(id, job.StatusSucceeded, 60*time.Second)
	t.Logf("loaded %d rows from a file in %v", etlRows, time.Since(start).Round(time.Millisecond))
	if n, d := e.scalar("SELECT count(*) FROM items"), e.scalar("SELECT count(DISTINCT id) FROM items"); n != etlRows || d != etlRows {
		t.Fatalf("got %d rows (%d distinct), want %d once each", n, d, etlRows)
	}
	var p job.Progress
	mustUnmarshal(t, j.Progress, &p)
	if p.Done != etlRows || p.Total != etlRows || p.Unit != "rows" || p.Stage != "done" {
		t.Errorf("got progress %+v, want %d of %d rows, stage done", p, etlRows, etlRows)
	}

	// The same data again, from an HTTP server, with renamed source fields
	// and new values: no duplicates, every row updated.
	v2 := filepath.Join(t.TempDir(), "v2.csv")
	writeItemsCSV(t, v2, "item_id,title,quantity,price,updated_at", etlRows, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/csv")
		http.ServeFile(w, r, v2)
	}))
	defer srv.Close()
	id = e.trigger(etlJob(pipeline.ETLArgs{Source: srv.URL + "/export", Table: "items", Keys: []string{"id"}, ChunkSize: 10_000,
		Columns: map[string]string{"id": "item_id", "name": "title", "qty": "quantity", "price": "price", "updated_at": "updated_at"}}))
	e.waitStatus(id, job.StatusSucceeded, 60*time.Second)
	if n := e.scalar("SELECT count(*) FROM items"); n != etlRows {
		t.Fatalf("after the rerun got %d rows, want %d (no duplicates)", n, etlRows)
	}
	if stale := e.scalar("SELECT count(*) FROM items WHERE qty <> id % 1000 + 1 OR updated_at <> '2026-11-02T10:00:00Z'"); stale != 0 {
		t.Errorf("got %d rows without the rerun's values, want 0", stale)
	}
	if got := e.scalar("SELECT (price * 100)::bigint FROM items WHERE id = 777"); got != 27777 {
		t.Errorf("got price×100 %d for id 777, want 27777", got)
	}
}

func TestETLResumesAfterTheLastCommittedChunk(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createItems("public.items")
	// Count every row written (transactionally: a rolled-back chunk counts
	// nothing) and fail once, on the first row of chunk 31.
	e.exec(`CREATE TABLE upserts (id bigint NOT NULL);
		CREATE SEQUENCE fail_once;
		CREATE FUNCTION count_upsert() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO upserts VALUES (NEW.id); RETURN NULL; END $$;
		CREATE TRIGGER count_upsert AFTER INSERT OR UPDATE ON items FOR EACH ROW EXECUTE FUNCTION count_upsert();
		CREATE FUNCTION fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
		  IF NEW.id = 30001 THEN
		    IF nextval('fail_once') = 1 THEN RAISE EXCEPTION 'injected failure in chunk 31'; END IF;
		  END IF;
		  RETURN NEW;
		END $$;
		CREATE TRIGGER fail_once BEFORE INSERT ON items FOR EACH ROW EXECUTE FUNCTION fail_once();`)
	writeItemsCSV(t, filepath.Join(e.dir, "items.csv"), "id,name,qty,price,updated_at", etlRows, 0)
	e.startManager("etl", 1)

	id := e.trigger(etlJob(pipeline.ETLArgs{Source: "items.csv", Table: "public.items", Keys: []string{"id"}, ChunkSize: 1000}))
	j := e.waitStatus(id, job.StatusSucceeded, 60*time.Second)
	if j.Attempt != 2 {
		t.Fatalf("got attempt %d, want 2 (one injected failure)", j.Attempt)
	}
	if n := e.scalar("SELECT count(*) FROM upserts"); n != etlRows {
		t.Errorf("got %d row upserts, want %d: chunks 1-30 must not be redone", n, etlRows)
	}
	if dup := e.scalar("SELECT count(*) FROM (SELECT id FROM upserts GROUP BY id HAVING count(*) > 1) d"); dup != 0 {
		t.Errorf("got %d rows upserted twice, want 0", dup)
	}
	var res struct {
		Rows, Upserted, Chunks int64
		ResumedAfterRow        int64 `json:"resumed_after_row"`
	}
	mustUnmarshal(t, j.Result, &res)
	if res.ResumedAfterRow != 30_000 || res.Chunks != 100 || res.Upserted != etlRows {
		t.Errorf("got result %+v, want resumed after row 30000, 100 chunks, %d upserted", res, etlRows)
	}
	if n := e.scalar("SELECT count(*) FROM items"); n != etlRows {
		t.Errorf("got %d rows, want %d", n, etlRows)
	}
}

func TestETLCancelStopsBetweenChunksKeepingCommittedOnes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createItems("public.items")
	// Slow every chunk down so the cancel lands mid-load.
	e.exec(`CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.03); RETURN NULL; END $$;
		CREATE TRIGGER slow AFTER INSERT ON items FOR EACH STATEMENT EXECUTE FUNCTION slow();`)
	writeItemsCSV(t, filepath.Join(e.dir, "items.csv"), "id,name,qty,price,updated_at", etlRows, 0)
	e.startManager("etl", 1)

	id := e.trigger(etlJob(pipeline.ETLArgs{Source: "items.csv", Table: "public.items", Keys: []string{"id"}, ChunkSize: 1000}))
	deadline := time.Now().Add(30 * time.Second)
	for {
		var p job.Progress
		mustUnmarshal(t, e.get(id).Progress, &p)
		if p.Done >= 10_000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("progress stuck at %+v", p)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := e.store.Cancel(t.Context(), id, "test"); err != nil {
		t.Fatal(err)
	}
	j := e.waitStatus(id, job.StatusCanceled, 10*time.Second)
	var p job.Progress
	mustUnmarshal(t, j.Progress, &p)
	rows := e.scalar("SELECT count(*) FROM items")
	if rows != p.Done || p.Done%1000 != 0 || p.Done < 10_000 || p.Done >= etlRows {
		t.Errorf("got %d rows kept and progress %+v, want whole committed chunks, mid-load, and progress equal to them", rows, p)
	}
	var cp struct{ Chunks, Rows int64 }
	var raw []byte
	if err := e.pool.QueryRow(t.Context(), "SELECT checkpoint FROM dl_jobs WHERE job_id = $1", id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	mustUnmarshal(t, raw, &cp)
	if cp.Rows != rows || cp.Chunks != rows/1000 {
		t.Errorf("got checkpoint %+v, want %d rows in %d chunks", cp, rows, rows/1000)
	}
}

func TestETLLoadsNDJSONWithAMapping(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(`CREATE SCHEMA shop; CREATE TABLE shop.events (id int PRIMARY KEY, tags jsonb, note text,
		score double precision, ok boolean, "Mixed Case" text)`)
	lines := `{"id":1,"labels":{"a":[1,2]},"text":"say \"hi\", then go","score":1.5,"ok":true,"mc":"M"}

{"id":2,"text":null,"score":-3}
{"id":1,"text":"the later duplicate wins","score":2}
`
	if err := os.WriteFile(filepath.Join(e.dir, "events.ndjson"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	e.startManager("etl", 1)
	id := e.trigger(etlJob(pipeline.ETLArgs{Source: "events.ndjson", Table: "shop.events", Keys: []string{"id"},
		Columns: map[string]string{"id": "id", "tags": "labels", "note": "text", "score": "score", "ok": "ok", "Mixed Case": "mc"}}))
	e.waitStatus(id, job.StatusSucceeded, 30*time.Second)
	var note, mixed *string
	var score float64
	var tags []byte
	if err := e.pool.QueryRow(t.Context(), `SELECT note, score, tags, "Mixed Case" FROM shop.events WHERE id = 1`).Scan(&note, &score, &tags, &mixed); err != nil {
		t.Fatal(err)
	}
	if deref(note) != "the later duplicate wins" || score != 2 || tags != nil || mixed != nil {
		t.Errorf("got id 1 = %v %v %s %v, want the later line's values (NULL where it has none)", deref(note), score, tags, mixed)
	}
	if n := e.scalar(`SELECT count(*) FROM shop.events WHERE id = 2 AND note IS NULL AND score = -3 AND ok IS NULL`); n != 1 {
		t.Errorf("row 2 was not loaded with NULLs for null and missing fields")
	}
}

func TestETLRejectsBadInputNamingTheRowAndColumn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, qty int)`)
	files := map[string]string{
		"bad-value.csv":    "id,name,qty\n1,a,1\n2,b,2\n3,c,3\n4,d,4\n5,e,5\n6,f,6\n7,g,seven\n8,h,8\n",
		"renamed.csv":      "item_id,title,quantity\n1,a,1\n2,b,2\n3,c,x\n",
		"ragged.csv":       "id,name,qty\n1,a,1\n2,b,2\n3,c,3\n4,d,4,extra\n",
		"null-name.csv":    "id,name,qty\n1,a,1\n2,b,2\n3,c,3\n4,d,4\n5,,5\n",
		"broken.ndjson":    "{\"id\":1,\"name\":\"a\"}\n{\"id\":2,\"name\":\"b\"}\n{\"id\": 3,\n",
		"fine.csv":         "id,name,qty\n1,a,1\n",
		"big-number.jsonl": "{\"id\":1,\"name\":\"a\",\"qty\":99999999999}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(e.dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		args pipeline.ETLArgs
		want []string
	}{
		{"missing table", pipeline.ETLArgs{Source: "fine.csv", Table: "public.nope", Keys: []string{"id"}}, []string{"table public.nope does not exist"}},
		{"missing column", pipeline.ETLArgs{Source: "fine.csv", Table: "items", Keys: []string{"id"},
			Columns: map[string]string{"id": "id", "colour": "name"}}, []string{`column "colour" does not exist`}},
		{"unknown source field", pipeline.ETLArgs{Source: "fine.csv", Table: "items", Keys: []string{"id"},
			Columns: map[string]string{"id": "id", "name": "title"}}, []string{`source field "title"`}},
		{"bad value", pipeline.ETLArgs{Source: "bad-value.csv", Table: "items", Keys: []string{"id"}},
			[]string{"row 7, column qty", "invalid input syntax for type integer"}},
		{"bad value under a mapping", pipeline.ETLArgs{Source: "renamed.csv", Table: "items", Keys: []string{"id"},
			Columns: map[string]string{"id": "item_id", "name": "title", "qty": "quantity"}}, []string{`row 3, column qty (source field "quantity")`}},
		{"ragged row", pipeline.ETLArgs{Source: "ragged.csv", Table: "items", Keys: []string{"id"}}, []string{"row 4", "wrong number of fields"}},
		{"null in a not-null column", pipeline.ETLArgs{Source: "null-name.csv", Table: "items", Keys: []string{"id"}},
			[]string{"row 5, column name", "null value"}},
		{"malformed NDJSON", pipeline.ETLArgs{Source: "broken.ndjson", Table: "items", Keys: []string{"id"}}, []string{"row 3", "not a JSON object"}},
		{"out of range", pipeline.ETLArgs{Source: "big-number.jsonl", Table: "items", Keys: []string{"id"}}, []string{"row 1, column qty", "out of range"}},
		{"no unique key", pipeline.ETLArgs{Source: "fine.csv", Table: "items", Keys: []string{"name"}}, []string{"no unique index on exactly (name)"}},
		{"dataloader's own table", pipeline.ETLArgs{Source: "fine.csv", Table: "dl_users", Keys: []string{"id"}}, []string{"cannot be loaded"}},
		{"file outside the directory", pipeline.ETLArgs{Source: "../../etc/passwd", Table: "items", Keys: []string{"id"}, Format: "csv"}, []string{"args.source"}},
		{"unknown target", pipeline.ETLArgs{Source: "fine.csv", Table: "items", Keys: []string{"id"}, Target: "warehouse"}, []string{"DL_ETL_TARGETS_JSON"}},
	}
	e.startManager("etl", 4)
	ids := make([]uuid.UUID, len(cases))
	for i, c := range cases {
		ids[i] = e.trigger(etlJob(c.args))
	}
	for i, c := range cases {
		j := e.waitFinished(ids[i], 30*time.Second)
		if j.Status != job.StatusFailed || j.Attempt != 1 {
			t.Errorf("%s: got %s after %d attempts, want failed at once (permanent)", c.name, j.Status, j.Attempt)
		}
		for _, w := range c.want {
			if !strings.Contains(deref(j.Error), w) {
				t.Errorf("%s: got error %q, want it to contain %q", c.name, deref(j.Error), w)
			}
		}
	}
	if n := e.scalar("SELECT count(*) FROM items"); n != 0 {
		t.Errorf("got %d rows from refused loads, want 0 (each refused chunk rolled back)", n)
	}
}

func TestETLLoadsIntoANamedTargetDatabase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	warehouse := pgtest.Pool(t)
	e.targets = map[string]string{"warehouse": warehouse.Config().ConnString()}
	if _, err := warehouse.Exec(t.Context(), `CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, qty int NOT NULL,
		price numeric(12,2), updated_at timestamptz)`); err != nil {
		t.Fatal(err)
	}
	writeItemsCSV(t, filepath.Join(e.dir, "items.csv"), "id,name,qty,price,updated_at", 2500, 0)
	e.startManager("etl", 1)
	id := e.trigger(etlJob(pipeline.ETLArgs{Source: "items.csv", Target: "warehouse", Table: "items", Keys: []string{"id"}, ChunkSize: 1000}))
	e.waitStatus(id, job.StatusSucceeded, 30*time.Second)
	var n int64
	if err := warehouse.QueryRow(t.Context(), "SELECT count(*) FROM items").Scan(&n); err != nil || n != 2500 {
		t.Errorf("got %d rows in the target database (%v), want 2500", n, err)
	}
	if got := e.scalar("SELECT (checkpoint->>'chunks')::bigint FROM dl_jobs WHERE job_id = $1", id); got != 3 {
		t.Errorf("got checkpoint chunks %d, want 3 (saved after each chunk)", got)
	}
}
