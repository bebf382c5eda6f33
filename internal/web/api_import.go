package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/job"
)

// Import tuning: lines per insert statement, how long a partial batch waits
// for more lines, and the longest accepted line.
const (
	importBatch     = 1000
	importLinger    = 5 * time.Millisecond
	importMaxLine   = 1 << 20
	importChanDepth = 2 * importBatch
)

// importAck answers one input line, written only after its job is committed.
type importAck struct {
	Line    int          `json:"line"`
	JobID   *uuid.UUID   `json:"job_id,omitempty"`
	Status  job.Status   `json:"status,omitempty"`
	Created *bool        `json:"created,omitempty"`
	Error   *errorDetail `json:"error,omitempty"`
}

// importSummary ends every import response. When Complete is false the
// client resends from ResumeFromLine (idempotency keys make resending
// already acknowledged lines harmless).
type importSummary struct {
	Lines          int    `json:"lines"`
	Created        int    `json:"created"`
	Existing       int    `json:"existing"`
	Failed         int    `json:"failed"`
	Complete       bool   `json:"complete"`
	ResumeFromLine int    `json:"resume_from_line,omitempty"`
	Reason         string `json:"reason,omitempty"`
}

type importLine struct {
	n    int
	data []byte
	err  error // read error; ends the input
}

// importJobs reads NDJSON triggers and streams back one ack per line after
// the line's batch committed. On shutdown it stops reading, commits and acks
// what it has read, and ends with a summary saying where to resume.
func (s *Server) importJobs(c echo.Context) error {
	if !s.ready.Load() {
		return job.Errorf(job.CodeUnavailable, "this replica is shutting down; retry on another")
	}
	req, w := c.Request(), c.Response()
	// Acks stream while the body is still being read.
	if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
		s.Log.Debug("full duplex unavailable", "error", err)
	}
	w.Header().Set(echo.HeaderContentType, "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)

	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	lines := make(chan importLine, importChanDepth)
	go readLines(ctx, req.Body, lines)

	var sum importSummary
	done := false
	for !done {
		batch, end, drained := s.nextBatch(ctx, lines)
		if len(batch) > 0 {
			if err := s.commitBatch(ctx, batch, enc, &sum); err != nil {
				sum.ResumeFromLine, sum.Reason = batch[0].n, "not stored: "+err.Error()
				break
			}
			w.Flush()
		}
		switch {
		case end != nil && !errors.Is(end, io.EOF):
			sum.Reason = "reading the request failed: " + end.Error()
			sum.ResumeFromLine = sum.Lines + 1
			done = true
		case end != nil:
			sum.Complete, done = true, true
		case drained:
			sum.Reason = "server shutting down; resend the rest to another replica"
			sum.ResumeFromLine = sum.Lines + 1
			done = true
		case ctx.Err() != nil:
			return nil // the client left; nothing more to say
		}
	}
	_ = enc.Encode(map[string]importSummary{"summary": sum})
	w.Flush()
	return nil
}

// nextBatch collects up to importBatch lines: it waits for the first, then
// takes what arrives within importLinger. It reports the end of input, or
// that the server started draining (then it takes only lines already read).
func (s *Server) nextBatch(ctx context.Context, lines <-chan importLine) (batch []importLine, end error, drained bool) {
	select {
	case l, ok := <-lines:
		if !ok {
			return nil, io.EOF, false
		}
		if l.err != nil {
			return nil, l.err, false
		}
		batch = append(batch, l)
	case <-s.draining:
		return takeBuffered(lines, nil), nil, true
	case <-ctx.Done():
		return nil, nil, false
	}
	linger := time.NewTimer(importLinger)
	defer linger.Stop()
	for len(batch) < importBatch {
		select {
		case l, ok := <-lines:
			if !ok {
				return batch, io.EOF, false
			}
			if l.err != nil {
				return batch, l.err, false
			}
			batch = append(batch, l)
		case <-linger.C:
			return batch, nil, false
		case <-s.draining:
			return takeBuffered(lines, batch), nil, true
		case <-ctx.Done():
			return batch, nil, false
		}
	}
	return batch, nil, false
}

// takeBuffered appends the lines already read (and no more) to batch.
func takeBuffered(lines <-chan importLine, batch []importLine) []importLine {
	for {
		select {
		case l, ok := <-lines:
			if !ok || l.err != nil {
				return batch
			}
			batch = append(batch, l)
		default:
			return batch
		}
	}
}

// commitBatch validates the lines, inserts the valid ones in one statement
// and writes one ack per line in input order.
func (s *Server) commitBatch(ctx context.Context, batch []importLine, enc *json.Encoder, sum *importSummary) error {
	acks := make([]importAck, len(batch))
	var params []job.TriggerParams
	var at []int
	for i, l := range batch {
		acks[i].Line = l.n
		p, err := parseTriggerLine(l.data)
		if err != nil {
			acks[i].Error = detailOf(err)
			continue
		}
		params = append(params, p)
		at = append(at, i)
	}
	// The insert commits even if the client leaves meanwhile: an accepted
	// line is never half-done.
	res, err := s.Store.TriggerBatch(context.WithoutCancel(ctx), params, s.DefaultLeaseTTL)
	if err != nil {
		return err
	}
	for j, r := range res {
		a := &acks[at[j]]
		id, created := r.JobID, r.Created
		a.JobID, a.Status, a.Created = &id, r.Status, &created
	}
	for _, a := range acks {
		switch {
		case a.Error != nil:
			sum.Failed++
		case *a.Created:
			sum.Created++
		default:
			sum.Existing++
		}
		sum.Lines++
		if err := enc.Encode(a); err != nil {
			return nil // the client left; what was inserted stays
		}
	}
	return nil
}

// parseTriggerLine decodes one NDJSON line strictly, like the trigger body.
func parseTriggerLine(data []byte) (job.TriggerParams, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return job.TriggerParams{}, job.Invalid("", "empty line")
	}
	var req triggerRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return job.TriggerParams{}, decodeError(err, importMaxLine)
	}
	if dec.More() {
		return job.TriggerParams{}, job.Invalid("", "a line must hold exactly one JSON object")
	}
	p, err := req.params()
	if err != nil {
		return p, err
	}
	return p, p.Validate()
}

func detailOf(err error) *errorDetail {
	var je *job.Error
	if errors.As(err, &je) {
		return &errorDetail{Code: string(je.Code), Message: je.Message, Field: je.Field}
	}
	return &errorDetail{Code: string(job.CodeInvalid), Message: err.Error()}
}

// readLines feeds numbered lines to out until EOF, a read error or ctx ends.
func readLines(ctx context.Context, body io.Reader, out chan<- importLine) {
	defer close(out)
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), importMaxLine)
	n := 0
	for sc.Scan() {
		n++
		line := append([]byte(nil), sc.Bytes()...)
		select {
		case out <- importLine{n: n, data: line}:
		case <-ctx.Done():
			return
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = errors.New("a line exceeds 1 MiB")
		}
		select {
		case out <- importLine{err: err}:
		case <-ctx.Done():
		}
	}
}
