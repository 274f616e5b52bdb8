package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

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

// writeError answers err as E2B's APIs do: {"code": N, "message": "..."},
// with Should-Retry: false: E2B's SDKs retry a 429, 502, 503 or 504 unless
// told not to, and none of this server's errors passes by waiting a few
// seconds (a limit, a registry that cannot be reached, a box that did not
// boot in time: a retried create would only do it all again).
func writeError(w http.ResponseWriter, err error) {
	st := statusOf(err)
	w.Header().Set("Should-Retry", "false")
	writeJSON(w, st, map[string]any{"code": st, "message": err.Error()})
}

// isRPC is a request for envd's Connect services.
func isRPC(r *http.Request) bool {
	p := strings.TrimPrefix(r.URL.Path, Prefix)
	return strings.HasPrefix(p, "/process.Process/") || strings.HasPrefix(p, "/filesystem.Filesystem/")
}

// sandboxGone answers a request for a sandbox that is not running as
// E2B's proxy in front of envd does: 502 and a message saying it "was not
// found", which E2B's SDKs turn into SandboxNotRunningException (a
// Connect call gets code unavailable with that message).
func sandboxGone(w http.ResponseWriter, r *http.Request, id, why string) {
	msg := fmt.Sprintf("The sandbox %s was not found%s", truncate(id), why)
	w.Header().Set("Should-Retry", "false")
	if ew := connect.NewErrorWriter(); isRPC(r) && ew.IsSupported(r) {
		ew.Write(w, r, connect.NewError(connect.CodeUnavailable, errors.New(msg)))
		return
	}
	writeJSON(w, http.StatusBadGateway, map[string]any{"sandboxId": truncate(id), "code": http.StatusBadGateway, "message": msg})
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
