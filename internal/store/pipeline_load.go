package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataloader/dataloader/internal/dbsqlc"
	"github.com/dataloader/dataloader/internal/job"
)

// Target is one connection to the database an etl.load job writes into,
// open for the job's run. Every chunk is one transaction on it.
type Target struct {
	conn *pgx.Conn
}

// OpenTarget connects to the database at dsn for one load.
func OpenTarget(ctx context.Context, dsn string) (*Target, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("target database: invalid connection string: %w", err)
	}
	cfg.RuntimeParams["application_name"] = "dataloader-etl"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to target database: %w", err)
	}
	return &Target{conn: conn}, nil
}

// Close closes the connection (and drops its staging table with it).
func (t *Target) Close(ctx context.Context) error { return t.conn.Close(ctx) }

// Column is a column of a target table.
type Column struct {
	Name      string
	Type      string // SQL type, e.g. "numeric(12,2)"
	NotNull   bool
	Generated bool // generated or GENERATED ALWAYS AS IDENTITY: not writable
}

// Table is a target table's shape.
type Table struct {
	Schema, Name string
	Columns      []Column
	UniqueKeys   [][]string // column sets (sorted) of the unique indexes ON CONFLICT can use
}

// Column returns the named column.
func (t Table) Column(name string) (Column, bool) {
	for _, c := range t.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return Column{}, false
}

// HasUniqueKey reports whether a unique index covers exactly cols.
func (t Table) HasUniqueKey(cols []string) bool {
	want := slices.Sorted(slices.Values(cols))
	for _, k := range t.UniqueKeys {
		if slices.Equal(k, want) {
			return true
		}
	}
	return false
}

// DescribeTable reads a table's columns and unique keys from the catalog;
// job.ErrNotFound when no such table exists (or it is not visible).
func (t *Target) DescribeTable(ctx context.Context, schema, name string) (Table, error) {
	q := dbsqlc.New(t.conn)
	cols, err := q.TargetColumns(ctx, dbsqlc.TargetColumnsParams{SchemaName: schema, TableName: name})
	if err != nil {
		return Table{}, fmt.Errorf("describe %s.%s: %w", schema, name, mapErr(err))
	}
	if len(cols) == 0 {
		return Table{}, job.ErrNotFound
	}
	keys, err := q.TargetUniqueKeys(ctx, dbsqlc.TargetUniqueKeysParams{SchemaName: schema, TableName: name})
	if err != nil {
		return Table{}, fmt.Errorf("describe keys of %s.%s: %w", schema, name, mapErr(err))
	}
	tb := Table{Schema: schema, Name: name, UniqueKeys: keys}
	for _, c := range cols {
		tb.Columns = append(tb.Columns, Column{Name: c.Name, Type: c.Type, NotNull: c.NotNull, Generated: c.Generated})
	}
	return tb, nil
}

// LoadSpec says what a Loader writes: the target table, the columns each
// row carries (in order) and the key columns of the upsert.
type LoadSpec struct {
	Table   Table
	Columns []Column
	Keys    []string
}

// Loader upserts chunks of rows into one table through a staging table:
// COPY (CSV) into a temporary table typed like the target columns, then one
// INSERT … SELECT … ON CONFLICT (keys) DO UPDATE. PostgreSQL parses every
// value during the COPY and names the line and column of a bad one.
type Loader struct {
	t       *Target
	spec    LoadSpec
	copySQL string
	// upsertSQL inserts the staged rows as they are; dedupeSQL keeps only
	// the last row of each key (ON CONFLICT cannot touch one row twice in a
	// statement). The sort costs about a tenth of the load, so it is used
	// only once a chunk has shown duplicate keys, and from then on.
	upsertSQL, dedupeSQL string
	dedupe               bool
}

// stageTable is the staging table's name: one per connection (pg_temp).
const stageTable = "dl_etl_stage"

// NewLoader creates the staging table on t's connection and prepares the
// statements. Every identifier is quoted; types come from the catalog.
func (t *Target) NewLoader(ctx context.Context, spec LoadSpec) (*Loader, error) {
	// Staging columns are r (the source row number) and c1..cn, whatever the
	// target's names, so no target name can collide with r.
	defs := []string{"r bigint NOT NULL"}
	stageCols := []string{"r"}
	targetCols := make([]string, len(spec.Columns))
	byName := map[string]string{}
	for i, c := range spec.Columns {
		sc := "c" + strconv.Itoa(i+1)
		def := sc + " " + c.Type
		if c.NotNull {
			def += " NOT NULL" // caught by the COPY, with its line number
		}
		defs = append(defs, def)
		stageCols = append(stageCols, sc)
		targetCols[i] = pgx.Identifier{c.Name}.Sanitize()
		byName[c.Name] = sc
	}
	keyStage := make([]string, len(spec.Keys))
	keyTarget := make([]string, len(spec.Keys))
	isKey := map[string]bool{}
	for i, k := range spec.Keys {
		if byName[k] == "" {
			return nil, fmt.Errorf("key column %q is not among the loaded columns", k)
		}
		keyStage[i], keyTarget[i], isKey[k] = byName[k], pgx.Identifier{k}.Sanitize(), true
	}
	var sets []string
	for _, c := range spec.Columns {
		if !isKey[c.Name] {
			id := pgx.Identifier{c.Name}.Sanitize()
			sets = append(sets, id+" = EXCLUDED."+id)
		}
	}
	action := "DO NOTHING"
	if len(sets) > 0 {
		action = "DO UPDATE SET " + strings.Join(sets, ", ")
	}
	ddl := "DROP TABLE IF EXISTS pg_temp." + stageTable + "; CREATE TEMP TABLE " + stageTable +
		" (" + strings.Join(defs, ", ") + ") ON COMMIT DELETE ROWS"
	if _, err := t.conn.Exec(ctx, ddl); err != nil {
		return nil, fmt.Errorf("create staging table: %w", err)
	}
	insert := "INSERT INTO " + pgx.Identifier{spec.Table.Schema, spec.Table.Name}.Sanitize() +
		" (" + strings.Join(targetCols, ", ") + ") SELECT "
	conflict := " ON CONFLICT (" + strings.Join(keyTarget, ", ") + ") " + action
	l := &Loader{t: t, spec: spec,
		copySQL:   "COPY pg_temp." + stageTable + " (" + strings.Join(stageCols, ", ") + ") FROM STDIN WITH (FORMAT csv)",
		upsertSQL: insert + strings.Join(stageCols[1:], ", ") + " FROM pg_temp." + stageTable + conflict,
		dedupeSQL: insert + "DISTINCT ON (" + strings.Join(keyStage, ", ") + ") " + strings.Join(stageCols[1:], ", ") +
			" FROM pg_temp." + stageTable + " ORDER BY " + strings.Join(keyStage, ", ") + ", r DESC" + conflict,
	}
	return l, nil
}

// Field is one value of a row: Null, or the text PostgreSQL parses.
type Field struct {
	Value string
	Null  bool
}

// Chunk is a batch of rows encoded for COPY as they are added.
type Chunk struct {
	buf  bytes.Buffer
	rows []int64 // source row number of each line
}

// Add appends one row: its source row number and its fields, in the
// loader's column order.
func (c *Chunk) Add(row int64, fields []Field) {
	c.buf.WriteString(strconv.FormatInt(row, 10))
	for _, f := range fields {
		c.buf.WriteByte(',')
		if f.Null {
			continue // an unquoted empty field is NULL in CSV COPY
		}
		c.buf.WriteByte('"')
		if strings.IndexByte(f.Value, '"') < 0 {
			c.buf.WriteString(f.Value)
		} else {
			c.buf.WriteString(strings.ReplaceAll(f.Value, `"`, `""`))
		}
		c.buf.WriteByte('"')
	}
	c.buf.WriteByte('\n')
	c.rows = append(c.rows, row)
}

// Len is the number of rows in the chunk.
func (c *Chunk) Len() int { return len(c.rows) }

// Reset empties the chunk for reuse.
func (c *Chunk) Reset() { c.buf.Reset(); c.rows = c.rows[:0] }

// LoadError is a chunk the database refused.
type LoadError struct {
	Row       int64  // source row at fault; 0 when the database did not say
	Column    string // target column at fault, when known
	FirstRow  int64  // the chunk's rows
	LastRow   int64
	Permanent bool   // bad data or schema: retrying cannot help
	Msg       string // what the database said, without its context lines
	Err       error  // the driver's error
}

func (e *LoadError) Error() string {
	msg := e.Msg
	if msg == "" {
		msg = e.Err.Error()
	}
	switch {
	case e.Row > 0 && e.Column != "":
		return fmt.Sprintf("row %d, column %s: %s", e.Row, e.Column, msg)
	case e.Row > 0:
		return fmt.Sprintf("row %d: %s", e.Row, msg)
	}
	return fmt.Sprintf("rows %d-%d: %s", e.FirstRow, e.LastRow, msg)
}

func (e *LoadError) Unwrap() error { return e.Err }

// Upsert writes a chunk in one transaction: COPY into the staging table,
// upsert into the target, then before commit calls within with the rows
// upserted (e.g. to save the job's checkpoint in the same transaction; nil
// for none). It returns the
// number of target rows inserted or updated. A refused chunk is a
// *LoadError naming the row and column when the database did.
func (l *Loader) Upsert(ctx context.Context, c *Chunk, within func(tx pgx.Tx, upserted int64) error) (int64, error) {
	if c.Len() == 0 {
		return 0, nil
	}
	n, err := l.upsert(ctx, c, within)
	var pgErr *pgconn.PgError
	if !l.dedupe && errors.As(err, &pgErr) && pgErr.Code == "21000" { // a key twice in the chunk
		l.dedupe = true
		n, err = l.upsert(ctx, c, within)
	}
	return n, err
}

func (l *Loader) upsert(ctx context.Context, c *Chunk, within func(tx pgx.Tx, upserted int64) error) (int64, error) {
	upsertSQL := l.upsertSQL
	if l.dedupe {
		upsertSQL = l.dedupeSQL
	}
	var n int64
	err := pgx.BeginFunc(ctx, l.t.conn, func(tx pgx.Tx) error {
		if _, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(c.buf.Bytes()), l.copySQL); err != nil {
			return l.loadError(c, err, true)
		}
		tag, err := tx.Exec(ctx, upsertSQL)
		if err != nil {
			return l.loadError(c, err, false)
		}
		n = tag.RowsAffected()
		if within != nil {
			return within(tx, n)
		}
		return nil
	})
	return n, err
}

// copyWhere matches the context of a COPY error: "COPY dl_etl_stage, line
// 17, column c3: …".
var copyWhere = regexp.MustCompile(`line (\d+)(?:, column (\w+))?`)

func (l *Loader) loadError(c *Chunk, err error, inCopy bool) error {
	le := &LoadError{FirstRow: c.rows[0], LastRow: c.rows[len(c.rows)-1], Err: err}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return le
	}
	le.Msg = pgErr.Message
	if pgErr.Detail != "" && pgErr.Code != "23502" { // a not-null detail repeats the whole row
		le.Msg += " (" + pgErr.Detail + ")"
	}
	switch pgErr.Code[:2] {
	case "22", "23", "42", "2F", "0A": // data, constraint, schema or privilege, unsupported
		le.Permanent = true
	}
	stageCol := pgErr.ColumnName
	if inCopy {
		if m := copyWhere.FindStringSubmatch(pgErr.Where); m != nil {
			if line, _ := strconv.Atoi(m[1]); line >= 1 && line <= len(c.rows) {
				le.Row = c.rows[line-1]
			}
			if m[2] != "" {
				stageCol = m[2]
			}
		}
	}
	if i, err := strconv.Atoi(strings.TrimPrefix(stageCol, "c")); err == nil && strings.HasPrefix(stageCol, "c") &&
		i >= 1 && i <= len(l.spec.Columns) {
		le.Column = l.spec.Columns[i-1].Name
	} else if !inCopy && stageCol != "" {
		le.Column = stageCol // a target column (e.g. a not-null one outside the mapping)
	}
	return le
}
