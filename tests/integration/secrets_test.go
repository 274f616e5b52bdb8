package integration

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/internal/shimapi"
	"github.com/boxlite/boxlite/tests/internal/testpki"
)

// secretsRequest is what the box runs: the placeholder from its
// environment in a header and the body, to url (verify: with the box's
// trust store; else unverified).
const secretsRequest = `
import os, ssl, sys, urllib.request
url, verify = sys.argv[1], sys.argv[2] == "1"
ph = os.environ["BOXLITE_SECRET_API"]
req = urllib.request.Request(url, data=("key=" + ph).encode(), headers={"Authorization": "Bearer " + ph})
ctx = None if verify else ssl._create_unverified_context()
print(urllib.request.urlopen(req, timeout=60, context=ctx).read().decode())
`

// TestSecrets: a box with a secret for host.boxlite.internal:PORT sends its
// placeholder; the HTTPS server there (its certificate from a test CA the
// host trusts through SSL_CERT_FILE) gets the real value, and unlisted
// servers (plain HTTP; HTTPS on another port) get the placeholder. The
// value is nowhere in the box: not in any process's environment, not in a
// file, not in the VMM's memory (guest RAM included).
func TestSecrets(t *testing.T) {
	needPython(t)
	ca := testpki.New(t)
	srvCert := ca.Leaf(t, "host.boxlite.internal")
	caFile := ca.WriteCA(t, t.TempDir())
	t.Setenv("SSL_CERT_FILE", caFile) // the shim, started below, reads the host's roots from it

	got := make(chan string, 16)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		got <- r.Header.Get("Authorization") + "|" + string(body)
		fmt.Fprint(w, "served")
	})
	listen := func(tlsCert *tls.Certificate) int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if tlsCert != nil {
			ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{*tlsCert}})
		}
		srv := &http.Server{Handler: handler}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().(*net.TCPAddr).Port
	}
	listed, otherTLS, plain := listen(&srvCert), listen(&srvCert), listen(nil)

	const value = "sk-real-9f3c1e77b2d04a6f8c5e0d1a2b3c4d5e"
	sec := boxlite.Secret{Name: "api", Value: value, Hosts: []string{"host.boxlite.internal:" + strconv.Itoa(listed)}}
	b := netBox(t, "python:slim", boxlite.WithSecrets(sec))
	ph := sec.GetPlaceholder()

	fetch := func(url string, verify bool) string {
		t.Helper()
		v := "0"
		if verify {
			v = "1"
		}
		res := runIn(t, b, boxlite.Command{Argv: []string{"python3", "-c", secretsRequest, url, v}})
		if res.Code != 0 || !strings.Contains(string(res.Stdout), "served") {
			t.Fatalf("fetch %s: exit %d\n%s%s", url, res.Code, res.Stdout, res.Stderr)
		}
		select {
		case r := <-got:
			return r
		case <-time.After(30 * time.Second):
			t.Fatalf("fetch %s: the server got nothing", url)
			return ""
		}
	}
	t.Run("listed host gets the value", func(t *testing.T) {
		r := fetch(fmt.Sprintf("https://host.boxlite.internal:%d/v1", listed), true)
		if want := "Bearer " + value + "|key=" + value; r != want {
			t.Errorf("the listed host got %q, want %q", r, want)
		}
	})
	t.Run("unlisted hosts get the placeholder", func(t *testing.T) {
		want := "Bearer " + ph + "|key=" + ph
		if r := fetch(fmt.Sprintf("http://host.boxlite.internal:%d/", plain), false); r != want {
			t.Errorf("plain HTTP got %q, want %q", r, want)
		}
		if r := fetch(fmt.Sprintf("https://host.boxlite.internal:%d/", otherTLS), false); r != want {
			t.Errorf("HTTPS on an unlisted port got %q, want %q", r, want)
		}
	})
	t.Run("the box never holds the value", func(t *testing.T) {
		// The VMM's whole address space, the guest's RAM in it, first:
		// the grep below has to put the value in the box to look for it.
		// The placeholder (in the box's environment) shows the scan reads
		// the guest's RAM.
		vmm := b.Info().Runtime.VMMPid
		if n, where := scanMemory(t, vmm, []byte(ph)); n == 0 || where == "" {
			t.Errorf("the placeholder is not in the %d MiB of the VMM's memory read: the scan misses the guest's RAM", n>>20)
		}
		if n, where := scanMemory(t, vmm, []byte(value)); n == 0 {
			t.Errorf("read none of the VMM's memory")
		} else if where != "" {
			t.Errorf("the value is in the VMM's memory: %s", where)
		} else {
			t.Logf("scanned %d MiB of the VMM's memory: no value", n>>20)
		}
		script := fmt.Sprintf(`
test "$BOXLITE_SECRET_API" = %q || { echo "placeholder env: $BOXLITE_SECRET_API"; exit 3; }
for f in /proc/[0-9]*/environ; do grep -qaF %q "$f" 2>/dev/null && { echo "in $f"; exit 4; }; done
grep -rlaF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev %q / 2>/dev/null && exit 5
echo clean`, ph, value, value)
		res := runIn(t, b, sh(script))
		if res.Code != 0 || !strings.Contains(string(res.Stdout), "clean") {
			t.Errorf("exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
		}
		// On the host: only in the box's 0600 secrets file.
		info := b.Info()
		for _, f := range []string{"box.json", shimapi.ConfigFile, shimapi.LogFile, shimapi.ConsoleFile} {
			if data, _ := os.ReadFile(filepath.Join(info.Dir, f)); bytes.Contains(data, []byte(value)) {
				t.Errorf("the value is in %s", f)
			}
		}
		if fi, err := os.Stat(filepath.Join(info.Dir, shimapi.SecretsFile)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("secrets file: %v %v", fi, err)
		}
	})
}

// scanMemory searches the readable memory of process pid for needle; it
// returns the bytes read and where the needle was found ("" if not).
func scanMemory(t *testing.T, pid int, needle []byte) (int64, string) {
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatalf("VMM maps: %v", err)
	}
	defer maps.Close()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatalf("VMM memory: %v", err)
	}
	defer mem.Close()
	var total int64
	sc := bufio.NewScanner(maps)
	buf := make([]byte, 4<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[1][0] != 'r' {
			continue
		}
		var lo, hi uint64
		fmt.Sscanf(f[0], "%x-%x", &lo, &hi)
		for off := lo; off < hi; {
			k := min(uint64(len(buf)), hi-off)
			n, _ := mem.ReadAt(buf[:k], int64(off))
			if n <= 0 {
				break
			}
			total += int64(n)
			if bytes.Contains(buf[:n], needle) {
				return total, sc.Text()
			}
			// Overlap by the needle, so one split across reads is found.
			if uint64(n) <= uint64(len(needle)) {
				off += uint64(n)
			} else {
				off += uint64(n - len(needle))
			}
		}
	}
	return total, ""
}
