package netstack

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"

	"github.com/boxlite/boxlite/internal/boxnet"
	"github.com/boxlite/boxlite/internal/netpolicy"
)

// TestSecretSubstitutionH2: a box speaking HTTP/2 (ALPN h2) to a secret's
// host gets its placeholders replaced as over HTTP/1.1 (path, headers, a
// streamed body whose writes split the placeholder), on concurrent
// streams, whether the real server speaks HTTP/2 or only HTTP/1.1; a
// request whose :authority is another host keeps its placeholder.
func TestSecretSubstitutionH2(t *testing.T) {
	for _, upH2 := range []bool{true, false} {
		t.Run(fmt.Sprintf("upstream-h2=%v", upH2), func(t *testing.T) { testH2(t, upH2) })
	}
}

func testH2(t *testing.T, upH2 bool) {
	const ph, value = "<BOXLITE_SECRET:api>", "sk-real-value-h2-456"
	got := make(chan string, 64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- fmt.Sprintf("%s|%s|%s|%s|%s", r.Proto, r.Host, r.Header.Get("Authorization"), r.URL.RawQuery, body)
		w.Header().Set("Trailer", "X-Done")
		fmt.Fprint(w, "ok")
		w.Header().Set("X-Done", "yes")
	}))
	roots, cert := testPKI(t, netpolicy.HostAlias)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.EnableHTTP2 = upH2
	srv.StartTLS()
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	g, boxRoots := secretGuest(t, ph, value, port, roots)
	var conns int
	var mu sync.Mutex
	box := &http2.Transport{DialTLSContext: func(ctx context.Context, _, _ string, cfg *tls.Config) (net.Conn, error) {
		c, err := dial(g, boxnet.HostIP.As4(), port)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(c, &tls.Config{ServerName: netpolicy.HostAlias, RootCAs: boxRoots, NextProtos: []string{"h2"}})
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, err
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
			return nil, fmt.Errorf("negotiated %q, want h2", p)
		}
		mu.Lock()
		conns++
		mu.Unlock()
		return tc, nil
	}}
	defer box.CloseIdleConnections()
	host := fmt.Sprintf("%s:%d", netpolicy.HostAlias, port)
	do := func(authority, body string, streamed bool) (string, *http.Response) {
		t.Helper()
		var rd io.Reader = strings.NewReader(body)
		if streamed { // unknown length, written in pieces that split the placeholder
			pr, pw := io.Pipe()
			go func() {
				for i := 0; i < len(body); i += 7 {
					pw.Write([]byte(body[i:min(i+7, len(body))]))
				}
				pw.Close()
			}()
			rd = pr
		}
		req, _ := http.NewRequest("POST", "https://"+host+"/v1?k="+ph, rd)
		req.Host = authority
		req.Header.Set("Authorization", "Bearer "+ph)
		resp, err := box.RoundTrip(req)
		if err != nil {
			t.Fatalf("h2 request: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("answer %q", b)
		}
		return <-got, resp
	}
	upProto := "HTTP/1.1"
	if upH2 {
		upProto = "HTTP/2.0"
	}
	body := `{"key":"` + ph + `"}`
	want := fmt.Sprintf("%s|%s|Bearer %s|k=%s|{\"key\":\"%s\"}", upProto, host, value, value, value)
	if r, resp := do(host, body, false); r != want {
		t.Errorf("listed host: server got %q, want %q", r, want)
	} else if resp.Trailer.Get("X-Done") != "yes" {
		t.Errorf("trailer: %v", resp.Trailer)
	}
	if r, _ := do(host, body, true); r != want {
		t.Errorf("streamed body: server got %q, want %q", r, want)
	}
	if r, _ := do("other.example", body, false); strings.Contains(r, value) || !strings.Contains(r, "Bearer "+ph) {
		t.Errorf("another :authority: server got %q", r)
	}
	// Concurrent streams on the box's one connection.
	var wg sync.WaitGroup
	results := make(chan string, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _ := do(host, body, true)
			results <- r
		}()
	}
	wg.Wait()
	close(results)
	for r := range results {
		if r != want {
			t.Errorf("concurrent stream: server got %q", r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != 1 {
		t.Errorf("the box opened %d connections, want 1 (streams multiplexed)", conns)
	}
}
