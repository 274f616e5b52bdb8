package session

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strings"

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
var driverMain string

//go:embed driver_rich.py
var driverRich string

// driverSource is driver.py with driver_rich.py in it (two files only to
// keep each readable: the interpreter gets one source).
var driverSource = func() string {
	const mark = "# @rich@ (driver_rich.py, joined in here by driver.go: rich results)\n"
	if !strings.Contains(driverMain, mark) {
		panic("session: driver.py has no " + mark)
	}
	return strings.Replace(driverMain, mark, driverRich, 1)
}()

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

//go:embed driver.js
var jsDriverSource string

// jsBoot runs the Node driver under a file name of its own (driver.js
// leaves its frames out of stacks) without declaring anything in the
// global scope the cells share.
const jsBoot = `require("vm").runInThisContext(process.argv.pop(),{filename:"<boxlite-session>"})`

// jsLaunch runs node (else nodejs) with the protocol on fd 3 and fds 1
// and 2 on the exec's stderr; 127 when neither is on PATH.
const jsLaunch = `for n in node nodejs; do command -v "$n" >/dev/null 2>&1 && exec "$n" -e "$1" -- "$2" 3>&1 1>&2; done
echo "no node or nodejs on PATH" >&2; exit 127`

// JavaScriptArgv is the command line that runs the Node session driver.
func JavaScriptArgv() []string {
	return []string{"/bin/sh", "-c", jsLaunch, "boxlite-js", jsBoot, jsDriverSource}
}

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

// driverDisplay is a D frame: a rich result.
type driverDisplay struct {
	ID   int                        `json:"id"`
	Data map[string]json.RawMessage `json:"data"`
	Main bool                       `json:"main"`
}

// maxResultTypes bounds the MIME types of one result.
const maxResultTypes = 64

// result checks a D frame's bundle: every value a string but
// application/json's, which stays JSON text.
func (d driverDisplay) result() (Result, error) {
	if len(d.Data) > maxResultTypes {
		return Result{}, fmt.Errorf("result with %d MIME types, limit %d", len(d.Data), maxResultTypes)
	}
	r := Result{IsMain: d.Main, Data: make(map[string]string, len(d.Data))}
	for k, v := range d.Data {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			r.Data[k] = s
		} else if k == "application/json" {
			r.Data[k] = string(v)
		} else {
			return Result{}, fmt.Errorf("result %q is not a string", k)
		}
	}
	return r, nil
}

type driverResult struct {
	ID       int        `json:"id"`
	Value    *string    `json:"value"`
	Error    *CellError `json:"error"`
	ExitCode int        `json:"exit_code"`
}

// runRequest is the frame that runs code as cell id. json.Marshal turns
// invalid UTF-8 into U+FFFD.
func runRequest(id int, code string, rich bool, env map[string]string) ([]byte, error) {
	req, err := json.Marshal(struct {
		Op   string            `json:"op"`
		ID   int               `json:"id"`
		Code string            `json:"code"`
		Rich bool              `json:"rich,omitempty"`
		Env  map[string]string `json:"env,omitempty"`
	}{"run", id, code, rich, env})
	if err != nil {
		return nil, err
	}
	msg := make([]byte, 4, 4+len(req))
	binary.BigEndian.PutUint32(msg, uint32(len(req)))
	return append(msg, req...), nil
}

// helloRequest asks a running driver to send its magic and hello again:
// a named session taking over an interpreter (Options.Name) reads past what
// the last client left unread to it.
func helloRequest() []byte {
	req := []byte(`{"op":"hello"}`)
	msg := make([]byte, 4, 4+len(req))
	binary.BigEndian.PutUint32(msg, uint32(len(req)))
	return append(msg, req...)
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
