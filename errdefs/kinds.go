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
