package rest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite/tests/internal/pinned"
	"github.com/boxlite/boxlite/tests/internal/testpki"
)

// TestBoxLiteSecrets: BoxLite's client creates a box with a secret through
// a server whose shims trust a test CA (SSL_CERT_FILE): the HTTPS server
// of the listed host (a certificate from that CA) gets the real value in a
// header and the body (from Python over HTTP/1.1 and from Node's http2
// client over HTTP/2), a plain-HTTP one the placeholder; the API never
// answers the value.
func TestBoxLiteSecrets(t *testing.T) {
	if os.Getenv("BOXLITE_TEST_PYTHON_IMAGE") == "" {
		t.Fatal("BOXLITE_TEST_PYTHON_IMAGE is needed (python:slim): run with `make test-go`")
	}
	if _, err := boxliteCmd(nil, "image", "load", os.Getenv("BOXLITE_TEST_PYTHON_IMAGE")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := testpki.New(t)
	caFile := ca.WriteCA(t, dir)
	got := make(chan string, 16)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		got <- fmt.Sprintf("%s|%s|%s", r.Proto, r.Header.Get("Authorization"), body)
		fmt.Fprint(w, "served")
	})
	listen := func(tlsOn bool) int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := &http.Server{Handler: handler}
		if tlsOn {
			leaf := ca.Leaf(t, "host.boxlite.internal")
			s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{leaf}}
			go s.ServeTLS(ln, "", "")
		} else {
			go s.Serve(ln)
		}
		t.Cleanup(func() { s.Close() })
		return ln.Addr().(*net.TCPAddr).Port
	}
	listed, plain := listen(true), listen(false)

	s, err := startServerEnv([]string{"SSL_CERT_FILE=" + caFile})
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	const value = "sk-rest-5e1d2c3b4a59687766554433221100ff"
	py := pinned.Venv(t, repo, "boxlite-"+upstreamBoxLite, "boxlite", upstreamBoxLite)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join(repo, "tests", "rest", "boxlite_secrets.py"))
	cmd.Env = append(os.Environ(), "BOXLITE_REST_URL="+s.url, "BOXLITE_API_KEY="+key, "VALUE="+value,
		"HOSTS=host.boxlite.internal:"+strconv.Itoa(listed),
		fmt.Sprintf("LISTED_URL=https://host.boxlite.internal:%d/v1", listed), fmt.Sprintf("PLAIN_URL=http://host.boxlite.internal:%d/", plain))
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !strings.Contains(string(out), "ALL OK") {
		t.Fatalf("boxlite_secrets.py (BoxLite's client) against boxlite serve: %v", err)
	}
	var seen []string
	for len(got) > 0 {
		seen = append(seen, <-got)
	}
	if len(seen) != 3 || seen[0] != "HTTP/1.1|Bearer "+value+"|key="+value || seen[2] != "HTTP/2.0|Bearer "+value+"|key="+value {
		t.Fatalf("the servers got %q; the listed host wants the value in the header and the body, over HTTP/1.1 and HTTP/2", seen)
	}
	parts := strings.SplitN(seen[1], "|", 3)
	if len(parts) != 3 || !strings.HasPrefix(parts[2], "key=") || parts[1] != "Bearer "+strings.TrimPrefix(parts[2], "key=") ||
		strings.Contains(seen[1], value) || !strings.Contains(parts[2], "BOXLITE_SECRET") {
		t.Fatalf("the unlisted server got %q, want the placeholder in both places", seen[1])
	}
}
