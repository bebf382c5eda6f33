package web

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/dataloader/dataloader/internal/job"
)

// errorBody is the JSON shape of every API error.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// statusOf maps each error code to one HTTP status.
var statusOf = map[job.Code]int{
	job.CodeInvalid:     http.StatusBadRequest,
	job.CodeNotFound:    http.StatusNotFound,
	job.CodeConflict:    http.StatusConflict,
	job.CodeUnavailable: http.StatusServiceUnavailable,
	job.CodeInternal:    http.StatusInternalServerError,
}

// handleError is echo's one error handler: job errors by their code, echo's
// own errors (404 route, 405, 413) by their status, anything else as a 500
// whose detail is logged, not shown.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, body := http.StatusInternalServerError, errorDetail{Code: string(job.CodeInternal), Message: "internal error"}
	var je *job.Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &je):
		status = statusOf[je.Code]
		body = errorDetail{Code: string(je.Code), Message: je.Message, Field: je.Field}
		if je.Code == job.CodeUnavailable {
			c.Response().Header().Set("Retry-After", "5")
		}
	case errors.As(err, &he):
		status = he.Code
		body = errorDetail{Code: codeForStatus(he.Code), Message: http.StatusText(he.Code)}
		if m, ok := he.Message.(string); ok && m != "" {
			body.Message = m
		}
	}
	if status >= 500 {
		s.Log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "error", err,
			"request_id", c.Response().Header().Get(echo.HeaderXRequestID))
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = c.JSON(status, errorBody{Error: body})
}

func codeForStatus(status int) string {
	switch status {
	case http.StatusNotFound:
		return string(job.CodeNotFound)
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusUnsupportedMediaType:
		return "unsupported_media_type"
	case http.StatusServiceUnavailable:
		return string(job.CodeUnavailable)
	}
	if status < 500 {
		return string(job.CodeInvalid)
	}
	return string(job.CodeInternal)
}
