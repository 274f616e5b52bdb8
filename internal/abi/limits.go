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
	MaxBootTimeout     = 10 * time.Minute
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

// Constant is one default or limit as the generated edges name it: the
// header's BOXLITE_<Name> macro, the SDKs' <Name> constants, the README's
// table (internal/abigen).
type Constant struct {
	Name  string // e.g. "DEFAULT_MEMORY_MIB": its unit ends the name
	Value int64
	Doc   string
}

// Constants are the defaults and limits every edge shows.
var Constants = []Constant{
	{"DEFAULT_MEMORY_MIB", DefaultMemoryMiB, "a box's guest memory"},
	{"MIN_MEMORY_MIB", MinMemoryMiB, "the least guest memory a box may have"},
	{"MAX_MEMORY_MIB", MaxMemoryMiB, "the most guest memory a box may have"},
	{"DEFAULT_CPUS", DefaultCPUs, "a box's virtual CPUs"},
	{"MAX_CPUS", MaxCPUs, "the most virtual CPUs a box may have"},
	{"DEFAULT_DISK_SIZE_GB", DefaultDiskSizeGB, "a box's writable disk (sparse: it costs what the box writes)"},
	{"MAX_DISK_SIZE_GB", MaxDiskSizeGB, "the largest writable disk a box may have"},
	{"DEFAULT_BOOT_TIMEOUT_SECS", int64(DefaultBootTimeout.Seconds()), "how long a start may take until the box's agent answers"},
	{"MAX_BOOT_TIMEOUT_SECS", int64(MaxBootTimeout.Seconds()), "the longest boot timeout a box may ask for"},
	{"DEFAULT_OUTPUT_LIMIT_BYTES", DefaultOutputLimitBytes, "output collected per stream of a run, a cell or a shell command"},
	{"DEFAULT_ROWS", DefaultRows, "a terminal's initial rows"},
	{"DEFAULT_COLS", DefaultCols, "a terminal's initial columns"},
}
