package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"connectrpc.com/connect"
	"github.com/boxlite/boxlite/errdefs"
)

// httpError is an error with its HTTP status fixed.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func statusErr(status int, format string, args ...any) error {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

// notServed is the 501 of what E2B's cloud does and this server does not.
func notServed(what string) error {
	return statusErr(http.StatusNotImplemented, "%s is not served by boxlite serve's E2B API", what)
}

// kinds maps our error kinds to HTTP statuses and Connect codes.
var kinds = []struct {
	err    error
	status int
	code   connect.Code
}{
	{errdefs.ErrInvalidArgument, http.StatusBadRequest, connect.CodeInvalidArgument},
	{errdefs.ErrNotFound, http.StatusNotFound, connect.CodeNotFound},
	{errdefs.ErrAlreadyExists, http.StatusConflict, connect.CodeAlreadyExists},
	{errdefs.ErrInvalidState, http.StatusConflict, connect.CodeFailedPrecondition},
	{errdefs.ErrTimeout, http.StatusGatewayTimeout, connect.CodeDeadlineExceeded},
	{errdefs.ErrUnsupported, http.StatusNotImplemented, connect.CodeUnimplemented},
	{errdefs.ErrClosed, http.StatusConflict, connect.CodeFailedPrecondition},
	{errdefs.ErrLimit, http.StatusTooManyRequests, connect.CodeResourceExhausted},
	{errdefs.ErrUnreachable, http.StatusBadGateway, connect.CodeUnavailable},
	{errdefs.ErrBootFailed, http.StatusInternalServerError, connect.CodeInternal},
}

func statusOf(err error) int {
	var he *httpError
	if errors.As(err, &he) {
		return he.status
	}
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return http.StatusRequestEntityTooLarge
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.status
		}
	}
	return http.StatusInternalServerError
}

// connectErr is err as a Connect error.
func connectErr(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	var he *httpError
	if errors.As(err, &he) {
		code := connect.CodeInternal
		switch he.status {
		case 400:
			code = connect.CodeInvalidArgument
		case 401:
			code = connect.CodeUnauthenticated
		case 404:
			code = connect.CodeNotFound
		case 409:
			code = connect.CodeFailedPrecondition
		case 413, 429:
			code = connect.CodeResourceExhausted
		case 501:
			code = connect.CodeUnimplemented
		}
		return connect.NewError(code, err)
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return connect.NewError(k.code, err)
		}
	}
	if errors.Is(err, context.Canceled) {
		return connect.NewError(connect.CodeCanceled, err)
	}
	return connect.NewError(connect.CodeInternal, err)
}

// writeError answers err as E2B's APIs do: {"code": N, "message": "..."}.
func writeError(w http.ResponseWriter, err error) {
	st := statusOf(err)
	writeJSON(w, st, map[string]any{"code": st, "message": err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"code":500,"message":"encoding the response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	w.Write(data)
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
