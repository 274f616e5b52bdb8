package restapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/restapi/wire"
)

// restError is how one of our error kinds answers over HTTP: BoxLite's
// status, code and type for it.
type restError struct {
	Status int
	Code   string
	Type   string
}

// kindErrors maps every errdefs kind to BoxLite's error model. A kind
// missing here fails TestEveryKindHasAnHTTPAnswer.
var kindErrors = map[errdefs.Kind]restError{
	errdefs.KindInvalidArgument: {http.StatusBadRequest, "invalid_argument", "InvalidArgumentError"},
	errdefs.KindNotFound:        {http.StatusNotFound, "not_found", "NotFoundError"},
	errdefs.KindAlreadyExists:   {http.StatusConflict, "already_exists", "AlreadyExistsError"},
	errdefs.KindInvalidState:    {http.StatusConflict, "invalid_state", "InvalidStateError"},
	errdefs.KindTimeout:         {http.StatusGatewayTimeout, "timeout", "TimeoutError"},
	errdefs.KindUnsupported:     {http.StatusNotImplemented, "unsupported", "UnsupportedError"},
	errdefs.KindBootFailed:      {http.StatusInternalServerError, "engine_unavailable", "EngineError"},
	errdefs.KindClosed:          {http.StatusConflict, "stopped", "StoppedError"},
	errdefs.KindLimit:           {http.StatusRequestEntityTooLarge, "resource_exhausted", "ResourceExhaustedError"},
	errdefs.KindUnreachable:     {http.StatusBadGateway, "upstream_unavailable", "UpstreamUnavailableError"},
	errdefs.KindInternal:        {http.StatusInternalServerError, "internal", "InternalError"},
}

// Errors of the HTTP edge itself, with no kind of ours.
var (
	errUnauthenticated = restError{http.StatusUnauthorized, "unauthenticated", "AuthError"}
	errQuota           = restError{http.StatusTooManyRequests, "resource_exhausted", "ResourceExhaustedError"}
	errImagePull       = restError{http.StatusUnprocessableEntity, "image_pull_failed", "ImageError"}
	errNotServed       = restError{http.StatusNotImplemented, "unsupported", "UnsupportedError"}
	errMethod          = restError{http.StatusMethodNotAllowed, "invalid_argument", "InvalidArgumentError"}
	errTooLarge        = restError{http.StatusRequestEntityTooLarge, "resource_exhausted", "ResourceExhaustedError"}
	errIdemReused      = restError{http.StatusUnprocessableEntity, "invalid_argument", "InvalidArgumentError"}
)

// Error is an error with its HTTP answer fixed, for what the edge refuses
// before any of our code runs (no key, over quota, a cloud-only route).
type Error struct {
	answer restError
	msg    string
}

func (e *Error) Error() string { return e.msg }

func newError(a restError, format string, args ...any) *Error {
	return &Error{answer: a, msg: fmt.Sprintf(format, args...)}
}

// Unauthenticated is the 401 of a request without a valid key.
func Unauthenticated(msg string) error { return newError(errUnauthenticated, "%s", msg) }

// TooLarge is the 413 of a body or upload over its bound.
func TooLarge(msg string) error { return newError(errTooLarge, "%s", msg) }

// answerFor is err's HTTP answer.
func answerFor(err error) restError {
	var e *Error
	if errors.As(err, &e) {
		return e.answer
	}
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return errTooLarge
	}
	if a, ok := kindErrors[errdefs.KindOf(err)]; ok {
		return a
	}
	return kindErrors[errdefs.KindInternal]
}

// WriteError answers err in BoxLite's error model, naming the request.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	a := answerFor(err)
	body := wire.ErrorResponse{Error: wire.ErrorModel{Message: err.Error(), Type: a.Type, Code: a.Code, RequestID: w.Header().Get("X-Request-Id")}}
	writeJSON(w, a.Status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"error":{"message":"encoding the response failed","type":"InternalError","code":"internal"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(data)+1))
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}
