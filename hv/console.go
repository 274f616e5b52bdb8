package hv

import (
	"bytes"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

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
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := fi.Size() - int64(maxBytes)
	if off < 0 {
		off = 0
	}
	b, err := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	if err != nil {
		return ""
	}
	if off > 0 {
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
