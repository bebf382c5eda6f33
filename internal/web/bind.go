package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/job"
)

// bindJSON decodes the request body into v strictly: size-limited, unknown
// fields rejected, one value only. Errors name the field where the decoder
// can tell it. The body is read as JSON whatever its Content-Type says
// (curl -d sends a form type), so the error always explains the JSON.
func (s *Server) bindJSON(c echo.Context, v any) error {
	req := c.Request()
	body := http.MaxBytesReader(c.Response(), req.Body, s.MaxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, s.MaxBodyBytes)
	}
	if _, err := dec.Token(); err != io.EOF {
		return job.Invalid("", "request body must hold exactly one JSON object")
	}
	return nil
}

func decodeError(err error, limit int64) error {
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &tooBig):
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", limit))
	case errors.As(err, &typeErr):
		return job.Invalid(typeErr.Field, "must be a JSON %s", jsonKind(typeErr.Type.Kind().String()))
	case errors.As(err, &syntaxErr):
		return job.Invalid("", "malformed JSON at byte %d", syntaxErr.Offset)
	case errors.Is(err, io.EOF):
		return job.Invalid("", "request body is empty; a JSON object is required")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return job.Invalid(field, "unknown field")
	}
	return job.Invalid("", "invalid JSON body: %v", err)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int32", "int64":
		return "integer"
	case "ptr":
		return "value of the documented type"
	case "slice", "array":
		return "array"
	case "map", "struct":
		return "object"
	}
	return goKind
}

// jobIDParam parses the :job_id path parameter.
func jobIDParam(c echo.Context) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param("job_id"))
	if err != nil {
		return uuid.Nil, job.Invalid("job_id", "must be a UUID")
	}
	return id, nil
}

// intQuery parses an optional integer query parameter within [lo, hi].
func intQuery(c echo.Context, name string, def, lo, hi int) (int, error) {
	raw := c.QueryParam(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < lo || n > hi {
		return 0, job.Invalid(name, "must be an integer between %d and %d", lo, hi)
	}
	return n, nil
}

// actor names who made a request, for the journal.
func actor(c echo.Context) string { return principal(c).Actor() }
