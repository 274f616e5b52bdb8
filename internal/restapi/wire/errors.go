package wire

import (
	"net/http"

	"github.com/boxlite/boxlite/errdefs"
)

// Answer is how an error answers over HTTP: BoxLite's status, code and
// type for it.
type Answer struct {
	Status int
	Code   string
	Type   string
}

// KindAnswers maps every errdefs kind to BoxLite's error model: the server
// answers a kind so, and a client maps a code back to its kind (KindOfCode)
// from this same table. A kind missing here fails
// TestEveryKindHasAnHTTPAnswer.
var KindAnswers = map[errdefs.Kind]Answer{
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

// Errors of the HTTP edge itself, with no kind of their own: each names the
// kind a client reports it as (edgeKinds).
var (
	AnswerUnauthenticated = Answer{http.StatusUnauthorized, "unauthenticated", "AuthError"}
	AnswerQuota           = Answer{http.StatusTooManyRequests, "resource_exhausted", "ResourceExhaustedError"}
	AnswerImagePull       = Answer{http.StatusUnprocessableEntity, "image_pull_failed", "ImageError"}
	AnswerNotServed       = Answer{http.StatusNotImplemented, "unsupported", "UnsupportedError"}
	AnswerMethod          = Answer{http.StatusMethodNotAllowed, "invalid_argument", "InvalidArgumentError"}
	AnswerTooLarge        = Answer{http.StatusRequestEntityTooLarge, "resource_exhausted", "ResourceExhaustedError"}
	AnswerIdemReused      = Answer{http.StatusUnprocessableEntity, "invalid_argument", "InvalidArgumentError"} // an Idempotency-Key used for another request
)

// edgeKinds are the kinds of the codes only the edge answers: a refused
// key is a bad argument of the caller's (its API key), a failed pull a
// missing image, as the local runtime reports them.
var edgeKinds = map[string]errdefs.Kind{
	AnswerUnauthenticated.Code: errdefs.KindInvalidArgument,
	AnswerImagePull.Code:       errdefs.KindNotFound,
}

// KindOfCode is the errdefs kind of an error body's code; an unknown code
// is KindInternal.
func KindOfCode(code string) errdefs.Kind {
	if k, ok := edgeKinds[code]; ok {
		return k
	}
	for k, a := range KindAnswers {
		if a.Code == code {
			return k
		}
	}
	return errdefs.KindInternal
}
