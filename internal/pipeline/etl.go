package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
)

// ETLTask is the name of the loader task.
const ETLTask = "etl.load"

// Bounds of etl.load's chunk size.
const (
	DefaultChunkSize = 5000
	MaxChunkSize     = 100_000
)

// ETLArgs are etl.load's args.
type ETLArgs struct {
	// Source is an http(s) URL, or a file path under DL_ETL_FILE_DIR
	// (relative to it, or absolute inside it).
	Source string `json:"source"`
	// Format is "csv" (with a header row) or "ndjson"; by default it follows
	// the source's extension (.csv, .ndjson, .jsonl) or Content-Type.
	Format string `json:"format,omitempty"`
	// Delimiter is the CSV field separator, "," by default.
	Delimiter string `json:"delimiter,omitempty"`
	// Headers are extra request headers for a URL source.
	Headers map[string]string `json:"headers,omitempty"`
	// Target names a database of DL_ETL_TARGETS_JSON; empty means the
	// product's own database. A DSN is never accepted here: args are input.
	Target string `json:"target,omitempty"`
	// Table is the target table, "schema.table" (schema "public" when omitted).
	Table string `json:"table"`
	// Keys are the target's key columns; a unique index must cover exactly them.
	Keys []string `json:"keys"`
	// Columns maps target column → source field (CSV header name or NDJSON
	// key); empty maps every source field to the column of the same name.
	Columns map[string]string `json:"columns,omitempty"`
	// ChunkSize is the number of source rows per transaction (default 5000).
	ChunkSize int `json:"chunk_size,omitempty"`
}

// Validate checks the args that need no I/O.
func (a *ETLArgs) Validate() error {
	switch {
	case a.Source == "":
		return job.Invalid("args.source", "is required")
	case a.Table == "":
		return job.Invalid("args.table", "is required")
	case len(a.Keys) == 0:
		return job.Invalid("args.keys", "needs at least one key column")
	case a.Format != "" && a.Format != FormatCSV && a.Format != FormatNDJSON:
		return job.Invalid("args.format", "must be csv or ndjson")
	case a.ChunkSize < 0 || a.ChunkSize > MaxChunkSize:
		return job.Invalid("args.chunk_size", "must be between 1 and %d", MaxChunkSize)
	case a.Delimiter != "" && (utf8.RuneCountInString(a.Delimiter) != 1 || strings.ContainsAny(a.Delimiter, "\"\r\n")):
		return job.Invalid("args.delimiter", "must be one character other than a quote or newline")
	}
	if _, _, err := splitTable(a.Table); err != nil {
		return err
	}
	return nil
}

// splitTable parses "schema.table" or "table".
func splitTable(s string) (schema, table string, err error) {
	schema, table, found := strings.Cut(s, ".")
	if !found {
		schema, table = "public", s
	}
	if schema == "" || table == "" || strings.Contains(table, ".") {
		return "", "", job.Invalid("args.table", "must be schema.table or table")
	}
	return schema, table, nil
}

// etlCheckpoint is etl.load's resume point: the chunks committed so far.
type etlCheckpoint struct {
	Source   string `json:"source"`
	Chunks   int    `json:"chunks"`
	Rows     int64  `json:"rows"`     // source row number of the last committed row
	Upserted int64  `json:"upserted"` // target rows inserted or updated
}

// ETL is the etl.load handler: it upserts a CSV or NDJSON source into a
// table in chunks, one transaction each, and checkpoints after every chunk
// so that a retried job resumes after the last committed one. On the
// product's own database the checkpoint commits in the chunk's transaction.
type ETL struct{ deps Deps }

// NewETL returns the etl.load handler.
func NewETL(d Deps) *ETL { return &ETL{deps: d} }

// Work implements job.Handler.
func (l *ETL) Work(ctx context.Context, run job.Run) error {
	a := ETLArgs{ChunkSize: DefaultChunkSize, Delimiter: ","}
	if err := job.DecodeArgs(run.Job().Args, &a); err != nil {
		return err
	}
	if a.ChunkSize == 0 {
		a.ChunkSize = DefaultChunkSize
	}
	dsn, own, err := l.targetDSN(a.Target)
	if err != nil {
		return err
	}
	schema, table, _ := splitTable(a.Table)
	if own && internalTable(schema, table) {
		return job.Permanent(job.Invalid("args.table", "%s.%s belongs to dataloader or the system and cannot be loaded", schema, table))
	}
	run.Progress(job.Progress{Unit: "rows", Stage: "connecting"})
	src, err := l.openSource(ctx, &a)
	if err != nil {
		return ctxErr(ctx, err)
	}
	defer src.body.Close()
	var rows rowReader
	if src.format == FormatCSV {
		rows, err = newCSVReader(src, []rune(a.Delimiter)[0])
	} else {
		rows, err = newNDJSONReader(src)
	}
	if err != nil {
		return ctxErr(ctx, err)
	}
	tgt, err := store.OpenTarget(ctx, dsn)
	if err != nil {
		return ctxErr(ctx, err)
	}
	defer tgt.Close(context.WithoutCancel(ctx))
	spec, fields, err := l.plan(ctx, tgt, &a, schema, table, rows)
	if err != nil {
		return ctxErr(ctx, err)
	}
	loader, err := tgt.NewLoader(ctx, spec)
	if err != nil {
		return ctxErr(ctx, err)
	}
	return l.load(ctx, run, &a, src, rows, loader, spec, fields, own)
}

// targetDSN resolves args.target to a connection string: the product's
// database, or an allow-listed one.
func (l *ETL) targetDSN(name string) (dsn string, own bool, err error) {
	if name == "" {
		return l.deps.DSN, true, nil
	}
	dsn, ok := l.deps.Targets[name]
	if !ok {
		return "", false, job.Permanent(job.Invalid("args.target", "%q is not a database configured in DL_ETL_TARGETS_JSON", name))
	}
	return dsn, false, nil
}

// internalTable reports whether a table of the product's own database is
// out of bounds for loading: dataloader's tables and the system catalogs.
func internalTable(schema, table string) bool {
	switch schema {
	case "pg_catalog", "information_schema", "pg_toast":
		return true
	}
	return strings.HasPrefix(schema, "pg_temp") || strings.HasPrefix(table, "dl_")
}

// plan checks the mapping against the table (it exists, every column
// exists and is writable, a unique index covers the keys) and returns the
// load spec and the source fields in column order.
func (l *ETL) plan(ctx context.Context, tgt *store.Target, a *ETLArgs, schema, table string, rows rowReader) (store.LoadSpec, []string, error) {
	tb, err := tgt.DescribeTable(ctx, schema, table)
	if errors.Is(err, job.ErrNotFound) {
		return store.LoadSpec{}, nil, job.Permanent(job.Invalid("args.table", "table %s.%s does not exist", schema, table))
	}
	if err != nil {
		return store.LoadSpec{}, nil, err
	}
	mapping := a.Columns
	if len(mapping) == 0 {
		mapping = map[string]string{}
		for _, n := range rows.names() {
			mapping[n] = n
		}
	}
	targets := slices.Sorted(func(yield func(string) bool) {
		for k := range mapping {
			if !yield(k) {
				return
			}
		}
	})
	spec := store.LoadSpec{Table: tb, Keys: a.Keys}
	fields := make([]string, len(targets))
	for i, name := range targets {
		c, ok := tb.Column(name)
		if !ok {
			return spec, nil, job.Permanent(job.Invalid("args.columns", "column %q does not exist in %s.%s", name, schema, table))
		}
		if c.Generated {
			return spec, nil, job.Permanent(job.Invalid("args.columns", "column %q of %s.%s is generated and cannot be written", name, schema, table))
		}
		spec.Columns = append(spec.Columns, c)
		fields[i] = mapping[name]
	}
	for _, k := range a.Keys {
		if _, ok := mapping[k]; !ok {
			return spec, nil, job.Permanent(job.Invalid("args.keys", "key column %q is not loaded (map it in columns)", k))
		}
	}
	if !tb.HasUniqueKey(a.Keys) {
		return spec, nil, job.Permanent(job.Invalid("args.keys", "%s.%s has no unique index on exactly (%s)", schema, table, strings.Join(a.Keys, ", ")))
	}
	if err := rows.bind(fields); err != nil {
		return spec, nil, err
	}
	return spec, fields, nil
}

// load runs the chunks: skip what the checkpoint says is committed, then
// read a chunk, upsert it with its checkpoint, report progress, and check
// for cancellation before the next.
func (l *ETL) load(ctx context.Context, run job.Run, a *ETLArgs, src *opened, rows rowReader, loader *store.Loader,
	spec store.LoadSpec, fields []string, own bool) error {
	cp := etlCheckpoint{Source: a.Source}
	if prev := run.Job().Checkpoint; len(prev) > 0 {
		var p etlCheckpoint
		if json.Unmarshal(prev, &p) == nil && p.Source == a.Source {
			cp = p
		}
	}
	resumedAt := cp.Rows
	vals := make([]store.Field, len(fields))
	progress := func(stage string) {
		total := src.estimateTotal(cp.Rows)
		if stage == "done" {
			total = cp.Rows
		}
		run.Progress(job.Progress{Done: cp.Rows, Total: total, Unit: "rows", Stage: stage,
			Message: fmt.Sprintf("%d chunks committed, %d rows upserted", cp.Chunks, cp.Upserted)})
	}
	progress("loading")
	var chunk store.Chunk
	for eof := false; !eof; {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		chunk.Reset()
		last := cp.Rows
		for chunk.Len() < a.ChunkSize {
			row, err := rows.next(vals)
			if err == io.EOF {
				eof = true
				break
			}
			if err != nil {
				return ctxErr(ctx, err)
			}
			last = row
			if row <= resumedAt {
				continue // committed by an earlier attempt
			}
			chunk.Add(row, vals)
		}
		if chunk.Len() == 0 {
			cp.Rows = max(cp.Rows, last)
			continue
		}
		next := cp
		next.Chunks++
		next.Rows = last
		var within func(pgx.Tx, int64) error
		if own {
			within = func(tx pgx.Tx, n int64) error {
				saved := next
				saved.Upserted += n
				b, _ := json.Marshal(saved)
				return store.SaveCheckpointTx(ctx, tx, store.FenceOf(run.Job()), b)
			}
		}
		n, err := loader.Upsert(ctx, &chunk, within)
		if err != nil {
			return ctxErr(ctx, l.chunkError(err, spec, fields))
		}
		next.Upserted += n
		cp = next
		if !own {
			// The chunk is committed on another database: its checkpoint
			// follows (a crash in between redoes an idempotent chunk).
			if err := run.Checkpoint(ctx, cp); err != nil {
				return ctxErr(ctx, err)
			}
		}
		progress("loading")
	}
	progress("done")
	res, _ := json.Marshal(map[string]any{"rows": cp.Rows, "upserted": cp.Upserted, "chunks": cp.Chunks,
		"resumed_after_row": resumedAt})
	run.SetResult(res)
	return nil
}

// chunkError names the source field beside the column of a refused row and
// marks bad data permanent.
func (l *ETL) chunkError(err error, spec store.LoadSpec, fields []string) error {
	var le *store.LoadError
	if !errors.As(err, &le) {
		return err
	}
	msg := le.Error()
	for i, c := range spec.Columns {
		if c.Name == le.Column && fields[i] != c.Name {
			msg = strings.Replace(msg, "column "+c.Name, fmt.Sprintf("column %s (source field %q)", c.Name, fields[i]), 1)
		}
	}
	var e error = &renamed{msg: "etl.load: " + msg, err: le}
	if le.Permanent {
		return job.Permanent(e)
	}
	return e
}

// renamed is an error with a better message than the one it wraps.
type renamed struct {
	msg string
	err error
}

func (r *renamed) Error() string { return r.msg }
func (r *renamed) Unwrap() error { return r.err }

// ctxErr prefers the context's cause (cancel, lost lease, shutdown) over
// the error it provoked in the middle of a read or write.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}
