package boxlite

import "github.com/boxlite/boxlite/internal/abi"

// DefaultOutputLimit is how much of each output stream (stdout, stderr) a
// collected result keeps by default: Box.Run, Session cells and shell session
// commands. The rest is read and dropped, so the process never blocks, and the
// result says it was truncated. See WithOutputLimit and Command.OutputLimit.
const DefaultOutputLimit = abi.DefaultOutputLimitBytes
