package errdefs

//go:generate go run ../internal/abigen -root ..

// KindSpec is one error kind of the contract. This table is the one source
// every edge derives its view from: `go generate ./errdefs` (internal/abigen)
// writes the C header's codes, capi's code table, the Python exception
// classes and cffi declarations, the Node addon's constants, its error codes
// and TypeScript union, and the READMEs' error tables; a test fails when any
// of them is stale.
type KindSpec struct {
	Kind Kind
	Err  error
	// Code is the C status code: 1-99, never reused once released.
	Code int
	// Doc says when the kind happens, in one sentence (header comments,
	// Python docstrings, README tables).
	Doc string
	// Python is the exception class; PythonBases are the builtin classes it
	// also derives from, so idiomatic except clauses catch it.
	Python      string
	PythonBases []string
}

// Kinds lists every error kind in code order.
var Kinds = []KindSpec{
	{KindInvalidArgument, ErrInvalidArgument, 1,
		"A bad argument: malformed options, an unknown option, a value out of range.",
		"InvalidArgumentError", []string{"ValueError"}},
	{KindNotFound, ErrNotFound, 2,
		"No such box, image, snapshot, file or command.",
		"NotFoundError", nil},
	{KindAlreadyExists, ErrAlreadyExists, 3,
		"The name is taken: a box, a snapshot, a copy's destination, a host port.",
		"AlreadyExistsError", nil},
	{KindInvalidState, ErrInvalidState, 4,
		"The box or execution is in the wrong state, e.g. exec on a stopped box.",
		"InvalidStateError", nil},
	{KindTimeout, ErrTimeout, 5,
		"An operation's or a command's timeout expired.",
		"TimeoutError", []string{"builtins.TimeoutError"}},
	{KindUnsupported, ErrUnsupported, 6,
		"Not supported by this host, box or agent.",
		"UnsupportedError", nil},
	{KindBootFailed, ErrBootFailed, 7,
		"The box did not boot; the message has the tail of its console.",
		"BootFailedError", nil},
	{KindClosed, ErrClosed, 8,
		"The runtime, box or execution handle was closed.",
		"ClosedError", nil},
	{KindLimit, ErrLimit, 9,
		"A size or count limit was exceeded (an argument list, a copy's max_bytes).",
		"LimitError", nil},
	{KindInternal, ErrInternal, 10,
		"A bug or an unexpected failure inside boxlite.",
		"InternalError", nil},
	{KindUnreachable, ErrUnreachable, 11,
		"A registry or another remote did not answer: no route, no name, refused.",
		"UnreachableError", []string{"ConnectionError"}},
}

// Lookup returns the spec of kind.
func Lookup(kind Kind) (KindSpec, bool) {
	for _, k := range Kinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return KindSpec{}, false
}

// BoxLiteClass is one of BoxLite 0.10's Python error classes that has no
// kind of its own here (BoxLite's InvalidArgumentError, NotFoundError, ...
// are ours by name). Each is generated into errors.py as a BoxliteError
// (so also a RuntimeError), and the kinds BoxLiteBases lists derive from
// it, so a program written for BoxLite (`except boxlite.StoppedError`)
// catches what we raise for the same failure.
type BoxLiteClass struct {
	Python string
	Code   string // BoxLite's code for it (its REST error code)
	Doc    string
}

// BoxLiteClasses lists them in BoxLite's order.
var BoxLiteClasses = []BoxLiteClass{
	{"SessionReapedError", "session_reaped", "BoxLite's class for a reaped session; nothing here raises it."},
	{"StoppedError", "stopped", "The box has stopped, or the handle was closed (InvalidStateError and ClosedError are StoppedErrors)."},
	{"ImageError", "image_pull_failed", "An image could not be pulled (UnreachableError is one)."},
	{"ExecutionError", "execution_failed", "BoxLite's class for a process that could not be run; here a missing command is NotFoundError, which is not an ExecutionError."},
	{"ResourceExhaustedError", "resource_exhausted", "A limit was reached (LimitError is one)."},
	{"NetworkError", "network_unavailable", "The network was unavailable (UnreachableError is one)."},
	{"UpstreamUnavailableError", "upstream_unavailable", "A remote the runtime depends on did not answer (UnreachableError is one)."},
	{"EngineError", "engine_unavailable", "The virtualization engine failed (BootFailedError is one)."},
	{"StorageError", "storage_error", "BoxLite's class for a storage failure; here those are InternalError (with the errno in the message)."},
	{"DatabaseError", "database_error", "BoxLite's class for a database failure; this runtime has no database, nothing raises it."},
	{"MetadataError", "metadata_error", "BoxLite's class for unreadable metadata; here a damaged box record is InternalError."},
	{"ConfigError", "config_error", "The configuration is refused (InvalidArgumentError is one)."},
}

// BoxLiteBases maps a kind to the BoxLite 0.10 classes its Python class
// also derives from.
var BoxLiteBases = map[Kind][]string{
	KindInvalidArgument: {"ConfigError"},
	KindInvalidState:    {"StoppedError"},
	KindClosed:          {"StoppedError"},
	KindLimit:           {"ResourceExhaustedError"},
	KindBootFailed:      {"EngineError"},
	KindUnreachable:     {"ImageError", "NetworkError", "UpstreamUnavailableError"},
}
