package restapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/restapi/wire"
)

// restError is how one of our error kinds answers over HTTP; the table
// (kind -> answer) is wire's, which clients read back.
type restError = wire.Answer

// kindErrors maps every errdefs kind to BoxLite's error model.
var kindErrors = wire.KindAnswers

// Errors of the HTTP edge itself, with no kind of ours.
var (
	errUnauthenticated = wire.AnswerUnauthenticated
	errQuota           = wire.AnswerQuota
	errImagePull       = wire.AnswerImagePull
	errNotServed       = wire.AnswerNotServed
	errMethod          = wire.AnswerMethod
	errTooLarge        = wire.AnswerTooLarge
	errIdemReused      = wire.AnswerIdemReused
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
