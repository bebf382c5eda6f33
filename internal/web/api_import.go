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

	// Parsing the next batch overlaps with inserting the previous one: the
	// committer goroutine inserts and writes acks, in order.
	batches := make(chan parsedBatch, 1)
	var sum importSummary
	committed := make(chan error, 1)
	go func() { committed <- s.commitBatches(ctx, batches, enc, w, &sum) }()

	var endNote string
	resume := 0
	for {
		batch, end, drained := s.nextBatch(ctx, lines)
		if len(batch) > 0 {
			select {
			case batches <- parseBatch(batch):
			case <-ctx.Done():
			}
		}
		if end != nil && !errors.Is(end, io.EOF) {
			endNote, resume = "reading the request failed: "+end.Error(), -1
		} else if drained {
			endNote, resume = "server shutting down; resend the rest to another replica", -1
		}
		if end != nil || drained || ctx.Err() != nil {
			break
		}
	}
	close(batches)
	err := <-committed
	if ctx.Err() != nil && endNote == "" {
		return nil // the client left; nothing more to say
	}
	switch {
	case err != nil:
		sum.Reason = "not stored: " + err.Error()
		sum.ResumeFromLine = sum.Lines + 1
	case resume < 0:
		sum.Reason, sum.ResumeFromLine = endNote, sum.Lines+1
	default:
		sum.Complete = true
	}
	_ = enc.Encode(map[string]importSummary{"summary": sum})
	w.Flush()
	return nil
}

// parsedBatch is a batch of lines, validated: acks hold the errors of bad
// lines; params[j] belongs to acks[at[j]].
type parsedBatch struct {
	acks   []importAck
	params []job.TriggerParams
	at     []int
}

func parseBatch(batch []importLine) parsedBatch {
	pb := parsedBatch{acks: make([]importAck, len(batch))}
	for i, l := range batch {
		pb.acks[i].Line = l.n
		p, err := parseTriggerLine(l.data)
		if err != nil {
			pb.acks[i].Error = detailOf(err)
			continue
		}
		pb.params = append(pb.params, p)
		pb.at = append(pb.at, i)
	}
	return pb
}

// commitBatches inserts each batch in one statement and writes one ack per
// line in input order, only after the commit. After a failed insert it
// stops: later batches are neither stored nor acknowledged.
func (s *Server) commitBatches(ctx context.Context, batches <-chan parsedBatch, enc *json.Encoder, w *echo.Response, sum *importSummary) error {
	var failed error
	for pb := range batches {
		if failed != nil {
			continue // drain, so the reader never blocks
		}
		// The insert commits even if the client leaves meanwhile: an
		// accepted line is never half-done.
		res, err := s.Store.TriggerBatch(context.WithoutCancel(ctx), pb.params, s.DefaultLeaseTTL)
		if err != nil {
			failed = err
			continue
		}
		for j, r := range res {
			a := &pb.acks[pb.at[j]]
			id, created := r.JobID, r.Created
			a.JobID, a.Status, a.Created = &id, r.Status, &created
		}
		for _, a := range pb.acks {
			switch {
			case a.Error != nil:
				sum.Failed++
			case *a.Created:
				sum.Created++
			default:
				sum.Existing++
			}
			sum.Lines++
			_ = enc.Encode(a)
		}
		w.Flush()
	}
	return failed
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
