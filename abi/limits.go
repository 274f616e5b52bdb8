package abi

import "time"

// A box's resources: defaults and the ranges core accepts.
const (
	DefaultMemoryMiB  = 512
	MinMemoryMiB      = 64
	MaxMemoryMiB      = 64 << 10
	DefaultCPUs       = 1
	MinCPUs           = 1
	MaxCPUs           = 64
	DefaultDiskSizeGB = 4
	MinDiskSizeGB     = 1
	MaxDiskSizeGB     = 1024
)

// A box's boot: how long a start may take until its agent answers, and the
// most any box may ask for (so no configuration, created or imported, makes
// a start wait for years).
const (
	DefaultBootTimeout = 60 * time.Second
	MaxBootTimeout     = 30 * time.Minute
)

// DefaultAutoRemove: a box is kept when it stops unless its options say
// otherwise. The SDKs' BoxLite-compatible classes (SimpleBox, CodeBox,
// InteractiveBox) ask for removal, as BoxLite's do; the low-level Box and C
// ABI take this default.
const DefaultAutoRemove = false

// DefaultHostname is a box's hostname unless its options set one, as in BoxLite.
const DefaultHostname = "boxlite"

// Output and terminals.
const (
	// DefaultOutputLimitBytes caps each collected output stream (stdout,
	// stderr) of a Run, a session cell or a shell command; the rest is read
	// and dropped and the result is marked truncated.
	DefaultOutputLimitBytes int64 = 64 << 20
	// DefaultRows and DefaultCols are a terminal's initial size.
	DefaultRows = 24
	DefaultCols = 80
	// MaxTerminalSize bounds rows and columns.
	MaxTerminalSize = 4096
)
