package netstack

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/boxlite/boxlite/internal/boxnet"
	"github.com/boxlite/boxlite/internal/netpolicy"
	"github.com/boxlite/boxlite/internal/shimapi"
)

func TestReplacerSplitPlaceholders(t *testing.T) {
	pairs := [][2][]byte{{[]byte("<BOXLITE_SECRET:a>"), []byte("VALUE-A")}, {[]byte("<PH-B>"), []byte("")}}
	in := "x<BOXLITE_SECRET:a><BOXLITE_SECRET:a>y<PH-B><BOXLITE_SECRET:a<BOXLITE_SECRET:a>z<BOXLITE_SECRET:"
	want := "xVALUE-AVALUE-Ay<BOXLITE_SECRET:aVALUE-Az<BOXLITE_SECRET:"
	for _, r := range []io.Reader{strings.NewReader(in), iotest.OneByteReader(strings.NewReader(in)), iotest.HalfReader(strings.NewReader(in))} {
		b, err := io.ReadAll(newReplacer(r, pairs))
		if err != nil || string(b) != want {
			t.Errorf("got %q, %v; want %q", b, err, want)
		}
	}
	// Large streams hold back at most a placeholder.
	big := strings.Repeat("a", 100000) + "<PH-B>" + strings.Repeat("b", 100000)
	b, _ := io.ReadAll(newReplacer(iotest.HalfReader(strings.NewReader(big)), pairs))
	if string(b) != strings.Replace(big, "<PH-B>", "", 1) {
		t.Errorf("large stream: %d bytes", len(b))
	}
}

// testPKI is a CA of the test's own and a server certificate from it.
func testPKI(t *testing.T, name string) (rootsPEM []byte, cert tls.Certificate) {
	caPEM, caKeyPEM, err := boxnet.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSecrets(shimapi.Secrets{CACertPEM: caPEM, CAKeyPEM: caKeyPEM}, []byte(caPEM))
	if err != nil {
		t.Fatal(err)
	}
	c, err := newSecretState(s).leaf(name)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(caPEM), *c
}

// secretGuest is a box's stack with one secret (placeholder ph, value)
// for the host alias on port, the host trusting roots, and the box's CA
// as a pool for its clients.
func secretGuest(t *testing.T, ph, value string, port int, roots []byte) (*stack.Stack, *x509.CertPool) {
	t.Helper()
	caPEM, caKey, err := boxnet.NewCA("box")
	if err != nil {
		t.Fatal(err)
	}
	sec, err := ParseSecrets(shimapi.Secrets{CACertPEM: caPEM, CAKeyPEM: caKey, Secrets: []shimapi.Secret{
		{Name: "api", Placeholder: ph, Value: value, Hosts: []string{fmt.Sprintf("%s:%d", netpolicy.HostAlias, port)}}}}, roots)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := guest(t, Config{Secrets: sec})
	boxRoots := x509.NewCertPool()
	boxRoots.AppendCertsFromPEM([]byte(caPEM))
	return g, boxRoots
}

func TestSecretSubstitution(t *testing.T) {
	const ph, value = "<BOXLITE_SECRET:api>", "sk-real-value-123"
	got := make(chan string, 8)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- fmt.Sprintf("%s|%s|%s|%s", r.Header.Get("Authorization"), r.URL.RawQuery, body, r.Header.Get("User-Agent"))
		fmt.Fprint(w, "ok")
	}))
	roots, cert := testPKI(t, netpolicy.HostAlias)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	g, boxRoots := secretGuest(t, ph, value, port, roots)

	do := func(serverName string, verify bool, req string) string {
		t.Helper()
		c, err := dial(g, boxnet.HostIP.As4(), port)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		tc := tls.Client(c, &tls.Config{ServerName: serverName, RootCAs: boxRoots, InsecureSkipVerify: !verify})
		if err := tc.Handshake(); err != nil {
			t.Fatalf("handshake as %s: %v", serverName, err)
		}
		// Written in pieces that split the placeholder.
		for i := 0; i < len(req); i += 7 {
			tc.Write([]byte(req[i:min(i+7, len(req))]))
		}
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			t.Fatalf("response: %v", err)
		}
		resp.Body.Close()
		return <-got
	}
	host := fmt.Sprintf("%s:%d", netpolicy.HostAlias, port)
	body := "{\"key\":\"" + ph + "\"}"
	r := do(netpolicy.HostAlias, true, "POST /v1?k="+ph+" HTTP/1.1\r\nHost: "+host+"\r\nAuthorization: Bearer "+ph+
		"\r\nContent-Length: "+fmt.Sprint(len(body))+"\r\n\r\n"+body)
	if want := "Bearer " + value + "|k=" + value + "|{\"key\":\"" + value + "\"}|"; r != want {
		t.Errorf("listed host: server got %q, want %q", r, want)
	}
	// Chunked, the placeholder split across chunks.
	r = do(netpolicy.HostAlias, true, "POST / HTTP/1.1\r\nHost: "+host+"\r\nTransfer-Encoding: chunked\r\nUser-Agent: t\r\n\r\n"+
		"5\r\nab<BO\r\n"+fmt.Sprintf("%x\r\n%s\r\n", len(ph)-3, ph[3:])+"0\r\n\r\n")
	if want := "||ab" + value + "|t"; r != want {
		t.Errorf("chunked: server got %q, want %q", r, want)
	}
	// A Host header naming another host keeps the placeholder.
	r = do(netpolicy.HostAlias, true, "GET / HTTP/1.1\r\nHost: other.example\r\nAuthorization: "+ph+"\r\n\r\n")
	if !strings.HasPrefix(r, ph+"|") {
		t.Errorf("other Host header: server got %q", r)
	}
	// Another server name is not intercepted: the box sees the real
	// server's certificate, and the placeholder arrives as sent.
	r = do("unlisted.example", false, "GET / HTTP/1.1\r\nHost: unlisted.example\r\nAuthorization: "+ph+"\r\n\r\n")
	if !strings.HasPrefix(r, ph+"|") {
		t.Errorf("unlisted name: server got %q", r)
	}
	if bytes.Contains([]byte(r), []byte(value)) {
		t.Error("the value reached an unlisted host")
	}
}

func TestSecretUpstreamVerified(t *testing.T) {
	// The real server's certificate is from a CA the host does not trust:
	// the box's connection ends, nothing is sent.
	hit := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit <- struct{}{} }))
	_, cert := testPKI(t, netpolicy.HostAlias)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	otherRoots, _ := testPKI(t, "x.example")
	caPEM, caKey, _ := boxnet.NewCA("box")
	sec, err := ParseSecrets(shimapi.Secrets{CACertPEM: caPEM, CAKeyPEM: caKey, Secrets: []shimapi.Secret{
		{Name: "api", Placeholder: "PH", Value: "V", Hosts: []string{fmt.Sprintf("%s:%d", netpolicy.HostAlias, port)}}}}, otherRoots)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := guest(t, Config{Secrets: sec})
	boxRoots := x509.NewCertPool()
	boxRoots.AppendCertsFromPEM([]byte(caPEM))
	c, err := dial(g, boxnet.HostIP.As4(), port)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := tls.Client(c, &tls.Config{ServerName: netpolicy.HostAlias, RootCAs: boxRoots})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	tc.Write([]byte("GET / HTTP/1.1\r\nHost: " + netpolicy.HostAlias + "\r\nAuthorization: PH\r\n\r\n"))
	if b, _ := io.ReadAll(tc); len(b) != 0 {
		t.Errorf("read %q", b)
	}
	select {
	case <-hit:
		t.Error("the untrusted server got the request")
	default:
	}
}
