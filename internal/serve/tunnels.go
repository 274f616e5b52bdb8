package serve

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"

	"github.com/boxlite/boxlite/internal/restapi"
)

// maxTunnelConns caps the connections the CONNECT listener holds at once,
// handshakes included (each key's tunnels are capped again by the API).
const maxTunnelConns = 4096

// tunnelServer is the CONNECT listener of BoxLite's REST tunnels: the
// descriptors the API gives name it (restapi.ServeTunnelConn).
type tunnelServer struct {
	ln    net.Listener
	api   *restapi.API
	slots chan struct{}

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// listenTunnels listens for CONNECTs at addr ("" or a port 0: a free port
// on the API's host), with TLS when tlsCfg is set, and tells the API where.
func listenTunnels(addr, apiListen, public string, tlsCfg *tls.Config, api *restapi.API) (*tunnelServer, error) {
	if addr == "" {
		host, _, _ := net.SplitHostPort(apiListen)
		addr = net.JoinHostPort(host, "0")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s (tunnels): %w", addr, err)
	}
	ln = newLingerListener(ln)
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
		ln = tls.NewListener(ln, tlsCfg)
	}
	if err := api.SetTunnelEndpoint(scheme, ln.Addr().(*net.TCPAddr).Port, public); err != nil {
		ln.Close()
		return nil, err
	}
	return &tunnelServer{ln: ln, api: api, slots: make(chan struct{}, maxTunnelConns), conns: map[net.Conn]struct{}{}}, nil
}

// serve accepts until close; each connection is the API's.
func (t *tunnelServer) serve(ctx context.Context) {
	for {
		t.slots <- struct{}{}
		c, err := t.ln.Accept()
		if err != nil {
			<-t.slots
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			c.Close()
			<-t.slots
			continue
		}
		t.conns[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go func() {
			defer func() {
				t.mu.Lock()
				delete(t.conns, c)
				t.mu.Unlock()
				<-t.slots
				t.wg.Done()
			}()
			t.api.ServeTunnelConn(ctx, c)
		}()
	}
}

// close stops listening and ends every tunnel connection (a shutdown: the
// boxes and their servers run on; clients see their connection end).
func (t *tunnelServer) close() {
	t.ln.Close()
	t.mu.Lock()
	t.closed = true
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
}

// TunnelAddr is where the CONNECT listener listens.
func (s *Server) TunnelAddr() net.Addr { return s.tunnels.ln.Addr() }
