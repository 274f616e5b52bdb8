package session

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"github.com/boxlite/boxlite/errdefs"
)

// The driver protocol. A Python session's interpreter runs a small driver
// (driver.py, embedded here and passed to the interpreter on its command
// line, so any image with Python 3 works) that talks to the host over its
// process's stdin and stdout; the cells' own output travels inside that
// protocol, so nothing a cell prints can be taken for protocol.
//
// Host to driver: a 4-byte big-endian length, then JSON ({"op": "run",
// "id": N, "code": ...}). Driver to host: after a magic line (what the
// interpreter printed before it is skipped), frames of a type byte, a
// 4-byte big-endian length and the payload: 'H' hello (JSON), 'S' the cell
// started, 'O' and 'E' output (raw bytes), 'R' the cell's result (JSON),
// 'X' a diagnostic (JSON).

//go:embed driver.py
var driverSource string

// driverBoot compiles the driver under a name of its own, so tracebacks can
// leave its frames out.
const driverBoot = `import sys;exec(compile(sys.argv.pop(1),"<boxlite-session>","exec"))`

var driverMagic = []byte("\x00\x01BOXLITE-SESSION-1\n")

// DefaultPythons are the interpreters a Python session tries, in order,
// when Options.Python is empty.
var DefaultPythons = []string{"/usr/local/bin/python3", "python3", "python"}

const (
	maxDriverFrame = 16 << 20 // results carry a repr capped at 1 MiB, output frames 64 KiB
	maxDriverJunk  = 1 << 20  // bytes an interpreter may print before the driver's magic
	maxCellCode    = 64 << 20
)

// PythonArgv is the command line that runs the session driver in python
// (what a prestarted session parks).
func PythonArgv(python string) []string {
	return []string{python, "-u", "-c", driverBoot, driverSource}
}

type driverHello struct {
	Version    int    `json:"version"`
	Pid        int    `json:"pid"`
	Python     string `json:"python"`
	Executable string `json:"executable"`
}

type driverResult struct {
	ID       int        `json:"id"`
	Value    *string    `json:"value"`
	Error    *CellError `json:"error"`
	ExitCode int        `json:"exit_code"`
}

// runRequest is the frame that runs code as cell id. json.Marshal turns
// invalid UTF-8 into U+FFFD.
func runRequest(id int, code string) ([]byte, error) {
	req, err := json.Marshal(struct {
		Op   string `json:"op"`
		ID   int    `json:"id"`
		Code string `json:"code"`
	}{"run", id, code})
	if err != nil {
		return nil, err
	}
	msg := make([]byte, 4, 4+len(req))
	binary.BigEndian.PutUint32(msg, uint32(len(req)))
	return append(msg, req...), nil
}

// readHello skips what the interpreter printed before the driver's magic,
// then reads the hello frame.
func readHello(br *bufio.Reader, h *driverHello) error {
	var seen int
	last := driverMagic[len(driverMagic)-1]
	var window []byte
	for {
		b, err := br.ReadBytes(last)
		seen += len(b)
		if err != nil {
			return fmt.Errorf("no hello: %w", err)
		}
		window = append(window, b...)
		if bytes.HasSuffix(window, driverMagic) {
			break
		}
		if len(window) > len(driverMagic) {
			window = window[len(window)-len(driverMagic):]
		}
		if seen > maxDriverJunk {
			return fmt.Errorf("no hello in the first %d bytes of output", maxDriverJunk)
		}
	}
	typ, payload, err := readDriverFrame(br)
	if err != nil {
		return err
	}
	if typ != 'H' {
		return fmt.Errorf("frame %q before the hello", typ)
	}
	if err := json.Unmarshal(payload, h); err != nil {
		return fmt.Errorf("hello: %v", err)
	}
	if h.Version != 1 {
		return fmt.Errorf("driver protocol version %d, want 1", h.Version)
	}
	return nil
}

func readDriverFrame(br *bufio.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxDriverFrame {
		return 0, nil, errdefs.Errorf(errdefs.ErrLimit, "driver frame %q claims %d bytes, limit %d", hdr[0], n, maxDriverFrame)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(br, payload); err != nil {
		return 0, nil, err
	}
	return hdr[0], payload, nil
}
