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

// Auto-pause (BoxOptions.AutoPauseSecs): the shortest and longest idle
// period a box may ask for before it pauses itself.
const (
	MinAutoPause = time.Second
	MaxAutoPause = 30 * 24 * time.Hour
)

// DefaultAutoRemove: a box is removed when it stops (Box.Stop, its VM
// exiting, or its creator's exit unless detached) unless its options say
// otherwise, as BoxLite's default is: a program written for BoxLite runs
// unchanged. Every edge takes this one default: the Go API, the C ABI (an
// absent "auto_remove"), Python and Node (an option left unset).
const DefaultAutoRemove = true

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

// Sessions and copies.
const (
	// DefaultSessionGrace is how long an interrupted cell or shell command
	// has to stop before its interpreter or shell is killed and restarted.
	DefaultSessionGrace = 3 * time.Second
	// DefaultCopyOutMaxBytes and DefaultCopyOutMaxEntries cap a copy out of
	// a box: what the box sends is hostile, and the host's disk is not the
	// box's.
	DefaultCopyOutMaxBytes   = 1 << 30
	DefaultCopyOutMaxEntries = 100_000
)

// Secrets (BoxOptions.Secrets): how many a box may have and their sizes.
const (
	MaxSecrets           = 32
	MaxSecretHosts       = 32 // hosts of one secret
	MaxSecretName        = 64
	MaxSecretValueBytes  = 16 << 10
	MinSecretPlaceholder = 8 // a shorter one would match ordinary text
	MaxSecretPlaceholder = 256
)

// Health checks (BoxOptions.Advanced.HealthCheck): BoxLite's
// HealthCheckOptions() defaults.
const (
	DefaultHealthInterval    = 30 * time.Second
	DefaultHealthTimeout     = 10 * time.Second
	DefaultHealthRetries     = 3
	DefaultHealthStartPeriod = 60 * time.Second
)

// BoxLite's SecurityOptions.maximum(): the limits it puts on every box
// process.
const (
	SecurityMaximumMaxOpenFiles     = 1024
	SecurityMaximumMaxFileSizeBytes = 1 << 30
	SecurityMaximumMaxProcesses     = 100
)

// Constant is one default or limit as the generated edges name it: the
// header's BOXLITE_<Name> macro, the SDKs' <Name> constants, the README's
// table (internal/abigen).
type Constant struct {
	Name  string // e.g. "DEFAULT_MEMORY_MIB": its unit ends the name
	Value int64
	Doc   string
	Bool  bool // a yes/no default: Value is 1 or 0, the SDKs show true or false
}

func number(name string, v int64, doc string) Constant {
	return Constant{Name: name, Value: v, Doc: doc}
}

func boolConstant(name string, v bool, doc string) Constant {
	c := Constant{Name: name, Doc: doc, Bool: true}
	if v {
		c.Value = 1
	}
	return c
}

// Constants are the defaults and limits every edge shows.
var Constants = []Constant{
	number("DEFAULT_MEMORY_MIB", DefaultMemoryMiB, "a box's guest memory"),
	number("MIN_MEMORY_MIB", MinMemoryMiB, "the least guest memory a box may have"),
	number("MAX_MEMORY_MIB", MaxMemoryMiB, "the most guest memory a box may have"),
	number("DEFAULT_CPUS", DefaultCPUs, "a box's virtual CPUs"),
	number("MIN_CPUS", MinCPUs, "the fewest virtual CPUs a box may have"),
	number("MAX_CPUS", MaxCPUs, "the most virtual CPUs a box may have"),
	number("DEFAULT_DISK_SIZE_GB", DefaultDiskSizeGB, "a box's writable disk (sparse: it costs what the box writes)"),
	number("MIN_DISK_SIZE_GB", MinDiskSizeGB, "the smallest writable disk a box may have"),
	number("MAX_DISK_SIZE_GB", MaxDiskSizeGB, "the largest writable disk a box may have"),
	number("DEFAULT_BOOT_TIMEOUT_SECS", int64(DefaultBootTimeout.Seconds()), "how long a start may take until the box's agent answers"),
	number("MAX_BOOT_TIMEOUT_SECS", int64(MaxBootTimeout.Seconds()), "the longest boot timeout a box may ask for"),
	number("MAX_AUTO_PAUSE_SECS", int64(MaxAutoPause.Seconds()), "the longest idle period before a box pauses itself (auto_pause_secs)"),
	number("DEFAULT_OUTPUT_LIMIT_BYTES", DefaultOutputLimitBytes, "output collected per stream of a run, a cell or a shell command"),
	number("DEFAULT_ROWS", DefaultRows, "a terminal's initial rows"),
	number("DEFAULT_COLS", DefaultCols, "a terminal's initial columns"),
	number("DEFAULT_SESSION_GRACE_SECS", int64(DefaultSessionGrace.Seconds()), "how long an interrupted cell or shell command has to stop before its session restarts"),
	number("DEFAULT_COPY_OUT_MAX_BYTES", DefaultCopyOutMaxBytes, "the file data a copy out of a box may bring unless its options say otherwise"),
	number("DEFAULT_COPY_OUT_MAX_ENTRIES", DefaultCopyOutMaxEntries, "the entries a copy out of a box may bring unless its options say otherwise"),
	number("MAX_SECRETS", MaxSecrets, "the most secrets a box may have"),
	number("MAX_SECRET_VALUE_BYTES", MaxSecretValueBytes, "the longest value a secret may have"),
	number("DEFAULT_HEALTH_INTERVAL_SECS", int64(DefaultHealthInterval.Seconds()), "between a box's health checks"),
	number("DEFAULT_HEALTH_TIMEOUT_SECS", int64(DefaultHealthTimeout.Seconds()), "how long a health check may take to pass"),
	number("DEFAULT_HEALTH_RETRIES", DefaultHealthRetries, "failed health checks in a row that make a box unhealthy"),
	number("DEFAULT_HEALTH_START_PERIOD_SECS", int64(DefaultHealthStartPeriod.Seconds()), "how long after a box is ready its failed health checks do not count"),
	number("SECURITY_MAXIMUM_MAX_OPEN_FILES", SecurityMaximumMaxOpenFiles, "open files of every box process under the maximum security preset"),
	number("SECURITY_MAXIMUM_MAX_FILE_SIZE_BYTES", SecurityMaximumMaxFileSizeBytes, "the largest file a box process may write under the maximum security preset"),
	number("SECURITY_MAXIMUM_MAX_PROCESSES", SecurityMaximumMaxProcesses, "processes of a box user (root exempt) under the maximum security preset"),
	boolConstant("DEFAULT_AUTO_REMOVE", DefaultAutoRemove, "a box is removed when it stops unless its options say otherwise"),
}
