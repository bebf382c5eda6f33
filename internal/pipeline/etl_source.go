package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/store"
)

// Source formats of etl.load.
const (
	FormatCSV    = "csv"
	FormatNDJSON = "ndjson"
)

// opened is a source being read: its body, its format, and what is known
// of its size.
type opened struct {
	body      io.ReadCloser
	format    string
	rowsTotal int64 // data rows counted in advance (files); 0 when unknown
	bytes     int64 // Content-Length or file size; -1 when unknown
	read      int64 // bytes read so far (by the reader, ahead of the rows)
}

// Read implements io.Reader, counting.
func (o *opened) Read(p []byte) (int, error) {
	n, err := o.body.Read(p)
	o.read += int64(n)
	return n, err
}

// estimateTotal returns the expected number of rows once done rows are
// read: counted in advance for files, extrapolated from the bytes read of
// a URL with a Content-Length, else 0 (unknown).
func (o *opened) estimateTotal(done int64) int64 {
	switch {
	case o.rowsTotal > 0:
		return max(o.rowsTotal, done)
	case o.bytes > 0 && o.read > 0 && done > 0:
		return max(done*o.bytes/o.read, done)
	}
	return 0
}

// openSource opens an http(s) URL or a file under fileDir.
func (l *ETL) openSource(ctx context.Context, a *ETLArgs) (*opened, error) {
	u, err := url.Parse(a.Source)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		return l.openURL(ctx, a, u)
	}
	return l.openFile(a)
}

func (l *ETL) openURL(ctx context.Context, a *ETLArgs, u *url.URL) (*opened, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, job.Permanent(job.Invalid("args.source", "%v", err))
	}
	for k, v := range a.Headers {
		req.Header.Set(k, v)
	}
	resp, err := l.deps.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch source: %w", err) // transport errors are worth a retry
	}
	if resp.StatusCode/100 != 2 {
		resp.Body.Close()
		err := fmt.Errorf("fetch source: HTTP %d", resp.StatusCode)
		if retryableStatus(resp.StatusCode) {
			return nil, err
		}
		return nil, job.Permanent(err)
	}
	format := a.Format
	if format == "" {
		format = formatOf(u.Path, resp.Header.Get("Content-Type"))
	}
	if format == "" {
		resp.Body.Close()
		return nil, job.Permanent(job.Invalid("args.format", "cannot tell csv from ndjson by the URL or Content-Type; set format"))
	}
	return &opened{body: resp.Body, format: format, bytes: resp.ContentLength}, nil
}

func (l *ETL) openFile(a *ETLArgs) (*opened, error) {
	if l.deps.FileDir == "" {
		return nil, job.Permanent(job.Invalid("args.source", "is not an http(s) URL, and file sources are disabled (set DL_ETL_FILE_DIR)"))
	}
	name := filepath.Clean(a.Source)
	if filepath.IsAbs(name) {
		rel, err := filepath.Rel(filepath.Clean(l.deps.FileDir), name)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, job.Permanent(job.Invalid("args.source", "file must be under DL_ETL_FILE_DIR"))
		}
		name = rel
	}
	// os.Root refuses names that escape the directory, also via symlinks.
	root, err := os.OpenRoot(l.deps.FileDir)
	if err != nil {
		return nil, fmt.Errorf("open DL_ETL_FILE_DIR: %w", err)
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		return nil, job.Permanent(job.Invalid("args.source", "cannot open file: %v", err))
	}
	st, err := f.Stat()
	if err != nil || st.IsDir() {
		f.Close()
		return nil, job.Permanent(job.Invalid("args.source", "is not a regular file"))
	}
	format := a.Format
	if format == "" {
		format = formatOf(name, "")
	}
	if format == "" {
		f.Close()
		return nil, job.Permanent(job.Invalid("args.format", "cannot tell csv from ndjson by the file name; set format"))
	}
	o := &opened{body: f, format: format, bytes: st.Size()}
	if lines, err := countLines(f); err == nil {
		o.rowsTotal = lines
		if format == FormatCSV {
			o.rowsTotal-- // the header
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("rewind source: %w", err)
	}
	return o, nil
}

// countLines counts the lines of r (a last line without newline counts).
func countLines(r io.Reader) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	var last byte = '\n'
	for {
		k, err := r.Read(buf)
		if k > 0 {
			n += int64(bytes.Count(buf[:k], []byte{'\n'}))
			last = buf[k-1]
		}
		if err == io.EOF {
			if last != '\n' {
				n++
			}
			return n, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// formatOf guesses the format from a name's extension or a content type.
func formatOf(name, contentType string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".csv":
		return FormatCSV
	case ".ndjson", ".jsonl":
		return FormatNDJSON
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case strings.Contains(mt, "csv"):
		return FormatCSV
	case strings.Contains(mt, "ndjson"), strings.Contains(mt, "jsonl"), strings.Contains(mt, "json-seq"):
		return FormatNDJSON
	}
	return ""
}

// rowReader yields a source's rows as the fields bound to the target
// columns, in order.
type rowReader interface {
	// names lists the fields the source offers (the CSV header, the keys of
	// the first NDJSON object), for the default mapping and its checks.
	names() []string
	// bind selects the fields next returns, in order.
	bind(fields []string) error
	// next fills dst (len = bound fields) with the next row and returns its
	// 1-based row number; io.EOF after the last row.
	next(dst []store.Field) (int64, error)
}

// rowError is malformed input at a row: a Permanent error naming it.
func rowError(row int64, format string, args ...any) error {
	return job.Permanent(fmt.Errorf("row %d: %s", row, fmt.Sprintf(format, args...)))
}

// csvReader reads CSV with a header row; row n is the n-th record after it.
// An empty field loads as NULL.
type csvReader struct {
	r      *csv.Reader
	header []string
	idx    []int
	row    int64
}

func newCSVReader(body io.Reader, delimiter rune) (*csvReader, error) {
	r := csv.NewReader(bufio.NewReaderSize(body, 1<<20))
	r.Comma = delimiter
	r.ReuseRecord = true
	header, err := r.Read()
	if err == io.EOF {
		return nil, job.Permanent(errors.New("source is empty: a CSV header row is required"))
	}
	if err != nil {
		return nil, job.Permanent(fmt.Errorf("CSV header: %w", err))
	}
	header = slices.Clone(header)
	header[0] = strings.TrimPrefix(header[0], "\ufeff")
	seen := map[string]bool{}
	for i, h := range header {
		if h == "" {
			return nil, job.Permanent(fmt.Errorf("CSV header: field %d has no name", i+1))
		}
		if seen[h] {
			return nil, job.Permanent(fmt.Errorf("CSV header: field %q appears twice", h))
		}
		seen[h] = true
	}
	return &csvReader{r: r, header: header}, nil
}

func (c *csvReader) names() []string { return c.header }

func (c *csvReader) bind(fields []string) error {
	c.idx = make([]int, len(fields))
	for i, f := range fields {
		c.idx[i] = slices.Index(c.header, f)
		if c.idx[i] < 0 {
			return job.Permanent(job.Invalid("args.columns", "source field %q is not in the CSV header (%s)", f, strings.Join(c.header, ", ")))
		}
	}
	return nil
}

func (c *csvReader) next(dst []store.Field) (int64, error) {
	rec, err := c.r.Read()
	if err == io.EOF {
		return 0, io.EOF
	}
	c.row++
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return 0, rowError(c.row, "line %d: %v", pe.Line, pe.Err)
		}
		return 0, fmt.Errorf("read source: %w", err)
	}
	for i, k := range c.idx {
		v := rec[k]
		dst[i] = store.Field{Value: v, Null: v == ""}
	}
	return c.row, nil
}

// maxLineBytes bounds one NDJSON line.
const maxLineBytes = 16 << 20

// ndjsonReader reads one JSON object per line; row n is line n (blank lines
// are skipped but counted). A missing field or null loads as NULL; strings
// load as their text, other values as their JSON text.
type ndjsonReader struct {
	r     *bufio.Scanner
	line  int64
	first map[string]json.RawMessage
	fRow  int64
	keys  []string
	bound []string
}

func newNDJSONReader(body io.Reader) (*ndjsonReader, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 1<<20), maxLineBytes)
	n := &ndjsonReader{r: sc}
	obj, row, err := n.read()
	if err == io.EOF {
		return nil, job.Permanent(errors.New("source is empty"))
	}
	if err != nil {
		return nil, err
	}
	n.first, n.fRow = obj, row
	for k := range obj {
		n.keys = append(n.keys, k)
	}
	slices.Sort(n.keys)
	return n, nil
}

// read returns the next non-blank line's object.
func (n *ndjsonReader) read() (map[string]json.RawMessage, int64, error) {
	for {
		if !n.r.Scan() {
			switch err := n.r.Err(); {
			case errors.Is(err, bufio.ErrTooLong):
				return nil, 0, rowError(n.line+1, "line longer than %d bytes", maxLineBytes)
			case err != nil:
				return nil, 0, fmt.Errorf("read source: %w", err)
			}
			return nil, 0, io.EOF
		}
		n.line++
		line := bytes.TrimSpace(n.r.Bytes())
		if len(line) == 0 {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(line, &obj); err != nil || obj == nil {
			return nil, 0, rowError(n.line, "not a JSON object: %v", errOr(err, "null"))
		}
		return obj, n.line, nil
	}
}

func errOr(err error, s string) any {
	if err != nil {
		return err
	}
	return s
}

func (n *ndjsonReader) names() []string { return n.keys }

func (n *ndjsonReader) bind(fields []string) error { n.bound = fields; return nil }

func (n *ndjsonReader) next(dst []store.Field) (int64, error) {
	obj, row := n.first, n.fRow
	if obj != nil {
		n.first = nil
	} else {
		var err error
		if obj, row, err = n.read(); err != nil {
			return 0, err
		}
	}
	for i, f := range n.bound {
		raw, ok := obj[f]
		switch {
		case !ok || string(raw) == "null":
			dst[i] = store.Field{Null: true}
		case raw[0] == '"':
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return 0, rowError(row, "field %q: %v", f, err)
			}
			dst[i] = store.Field{Value: s}
		default:
			dst[i] = store.Field{Value: string(raw)}
		}
	}
	return row, nil
}
