package shimapi

import (
	"bytes"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// A box's logs are files in its directory that the guest writes through the
// shim (ConsoleFile, rotated once to ConsoleFile+".1" at ConsoleLogMax) or
// the shim writes itself (LogFile). Readers on either side of the library /
// shim split read them with ConsoleTail: the text is the guest's, bounded here
// and cleaned of broken UTF-8 and carriage returns.

// ConsoleLogMax caps a console log: a file that reaches it is renamed to
// its name + ".1" (replacing the one before) and started anew, so a guest
// printing without end uses at most twice this on disk.
const ConsoleLogMax = 1 << 20

// DefaultConsoleTail is the number of bytes ConsoleTail reads when maxBytes <= 0.
const DefaultConsoleTail = 4096

// ConsoleTail returns the last bytes (at most maxBytes, DefaultConsoleTail
// when maxBytes <= 0) of the console log at path, for boot-failure errors.
// When the file is longer, the partial first line is dropped. Invalid UTF-8
// and carriage returns are cleaned up and surrounding blank space trimmed.
// A missing or unreadable file gives "".
func ConsoleTail(path string, maxBytes int) string {
	if maxBytes <= 0 {
		maxBytes = DefaultConsoleTail
	}
	b, cut := lastBytes(path, maxBytes)
	if !cut && len(b) < maxBytes { // the log was rotated: its start is in .1
		var older []byte
		older, cut = lastBytes(path+".1", maxBytes-len(b))
		b = append(older, b...)
	}
	if cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
	}
	s := strings.ReplaceAll(string(b), "\r", "")
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return strings.TrimSpace(s)
}

// lastBytes reads the last n bytes of a file, and whether it had more.
func lastBytes(path string, n int) ([]byte, bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false
	}
	off := max(fi.Size()-int64(n), 0)
	b, err := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	if err != nil {
		return nil, false
	}
	return b, off > 0
}
