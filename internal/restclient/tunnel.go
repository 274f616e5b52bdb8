package restclient

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/restapi/wire"
)

// tunnelSetup bounds a tunnel's descriptor, dial, TLS and CONNECT.
const tunnelSetup = 30 * time.Second

// TunnelConn is a byte stream to a port in a server's box, through the
// server's CONNECT listener (see boxlite serve's docs: Tunnels).
type TunnelConn struct {
	net.Conn
	r io.Reader // what the CONNECT's answer left buffered, then Conn
}

func (t *TunnelConn) Read(p []byte) (int, error) { return t.r.Read(p) }

// CloseWrite half-closes the stream: the box's side reads EOF.
func (t *TunnelConn) CloseWrite() error {
	if cw, ok := t.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errdefs.Errorf(errdefs.ErrUnsupported, "half-close of a tunnel over %T", t.Conn)
}

// Err is nil: a failure shows as a read or write error.
func (t *TunnelConn) Err() error { return nil }

// DialTunnel opens a tunnel to TCP port (1-65535) on the box's loopback:
// a descriptor from POST /boxes/{id}/network/tunnel, then a CONNECT to the
// listener it names, with its token.
func (b *Box) DialTunnel(ctx context.Context, port int) (*TunnelConn, error) {
	what := fmt.Sprintf("tunnel to port %d of box %s", port, b.id)
	if port < 1 || port > 65535 {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: want a port from 1 to 65535", what)
	}
	ctx, cancel := context.WithTimeout(ctx, tunnelSetup)
	defer cancel()
	var d wire.TunnelDescriptor
	if err := b.c.do(ctx, request{method: "POST", path: b.path("/network/tunnel"), query: url.Values{"port": {strconv.Itoa(port)}}}, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	u, err := url.Parse(d.URI)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User == nil || u.Port() == "" {
		return nil, errdefs.Errorf(errdefs.ErrInternal, "%s: the server's descriptor is not http(s)://TOKEN@HOST:PORT", what)
	}
	if u.Scheme == "http" && u.Hostname() != b.c.base.Hostname() && !isLoopback(u.Hostname()) {
		return nil, errdefs.Errorf(errdefs.ErrInvalidArgument, "%s: the server names a plain-http tunnel beyond loopback on another host", what)
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, "tcp", u.Host)
	if err == nil && u.Scheme == "https" {
		tc := tls.Client(c, &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12})
		if err = tc.HandshakeContext(ctx); err == nil {
			c = tc
		}
	}
	if err != nil {
		if c != nil {
			c.Close()
		}
		return nil, errdefs.Errorf(errdefs.ErrUnreachable, "%s: the tunnel listener %s: %v", what, u.Host, err)
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	authority := u.User.Username() + "@" + u.Host
	br := bufio.NewReaderSize(c, 4096)
	_, err = fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", authority, authority)
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	}
	if err == nil && resp.StatusCode != http.StatusOK {
		// A refusal's plain-text message, read while ctx still closes c.
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		stop()
		c.Close()
		return nil, errdefs.New(kindOfStatus(resp.StatusCode), fmt.Sprintf("%s: %s", what, strings.TrimSpace(string(msg))))
	}
	if !stop() || err != nil {
		c.Close()
		return nil, errdefs.Errorf(errdefs.ErrUnreachable, "%s: CONNECT: %v", what, err)
	}
	return &TunnelConn{Conn: c, r: br}, nil
}
