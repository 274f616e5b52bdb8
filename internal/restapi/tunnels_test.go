package restapi

import (
	"bufio"
	"context"
	"crypto/sha256"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestTunnelRefusals: the CONNECT listener answers what it will not carry
// with one status line and a reason, before any box is reached.
func TestTunnelRefusals(t *testing.T) {
	a := &API{tunnels: newTunnelBook()}
	live, expired, full := "bxt_live", "bxt_expired", "bxt_full"
	a.tunnels.grants[sha256.Sum256([]byte(expired))] = tunnelGrant{box: "b", key: "k", port: 80, expires: time.Now().Add(-time.Second)}
	a.tunnels.grants[sha256.Sum256([]byte(full))] = tunnelGrant{box: "b", key: "busy", port: 80, expires: time.Now().Add(time.Hour)}
	a.tunnels.conns["busy"] = TunnelConnsPerKey
	for _, c := range []struct {
		head string
		want int
	}{
		{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusMethodNotAllowed},
		{"CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", http.StatusForbidden}, // no token
		{"CONNECT " + live + "@127.0.0.1:1 HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusForbidden},
		{"CONNECT " + expired + "@127.0.0.1:1 HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusForbidden},
		{"CONNECT " + full + "@127.0.0.1:1 HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusTooManyRequests},
		{"nonsense\r\n\r\n", http.StatusBadRequest},
		{"CONNECT a@b:1 HTTP/1.1\r\nX: " + strings.Repeat("y", tunnelHeadBytes) + "\r\n\r\n", http.StatusBadRequest},
	} {
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() { a.ServeTunnelConn(context.Background(), server); close(done) }()
		go client.Write([]byte(c.head))
		client.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(client), nil)
		if err != nil {
			t.Fatalf("%.40q: %v", c.head, err)
		}
		if resp.StatusCode != c.want {
			t.Errorf("%.40q: %d, want %d", c.head, resp.StatusCode, c.want)
		}
		client.Close()
		<-done
	}
	if a.tunnels.conns["busy"] != TunnelConnsPerKey {
		t.Errorf("a refused CONNECT changed the key's connection count: %d", a.tunnels.conns["busy"])
	}
}
