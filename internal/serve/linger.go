package serve

import (
	"context"
	"io"
	"net"
	"sync"
	"time"
)

// A connection this server closes closes lingering (Apache's lingering
// close): its write side shuts down after what it holds, and what the
// client still sends is read and dropped until the client closes too.
//
// Closing a TCP socket that holds unread bytes answers with a reset, and
// a reset throws away the output still queued on either side: megabytes
// when a client paused reading (an attach the server drops after its send
// timeout, then makes again) and sent one frame (a ping, a pong) in the
// meantime. net/http lingers half a second for its own connections; the
// ones handlers take over (WebSockets, tunnels) close here.
const (
	// lingerFor bounds how long a closed connection is drained: a client
	// that pauses longer than that (past the server's own timeouts) and
	// sends meanwhile loses what was in flight.
	lingerFor = 2 * time.Minute
	// lingerBytes bounds what is read and dropped from one.
	lingerBytes = 1 << 20
	// maxLingering bounds the connections draining at once; beyond it a
	// connection closes at once.
	maxLingering = 1024
)

// lingerListener gives its TCP connections a lingering close, until it is
// closed itself: the server has stopped, and the drains under way end.
type lingerListener struct {
	net.Listener
	slots  chan struct{}
	closed context.Context
	close  context.CancelFunc
}

func newLingerListener(ln net.Listener) *lingerListener {
	closed, close := context.WithCancel(context.Background())
	return &lingerListener{Listener: ln, slots: make(chan struct{}, maxLingering), closed: closed, close: close}
}

// Close stops accepting and ends the drains under way.
func (l *lingerListener) Close() error {
	l.close()
	return l.Listener.Close()
}

func (l *lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	return &lingerConn{TCPConn: tc, l: l}, nil
}

type lingerConn struct {
	*net.TCPConn
	l    *lingerListener
	once sync.Once
}

// Close shuts the write side (the client reads what was queued, then the
// end), wakes a writer still blocked, and drains the read side in the
// background until the client closes, lingerFor passes, lingerBytes were
// read or the listener is closed; then it closes the socket.
func (c *lingerConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		if c.l.closed.Err() != nil {
			err = c.TCPConn.Close()
			return
		}
		select {
		case c.l.slots <- struct{}{}:
		default:
			err = c.TCPConn.Close()
			return
		}
		_ = c.TCPConn.SetWriteDeadline(time.Now())
		if err = c.TCPConn.CloseWrite(); err != nil {
			<-c.l.slots
			err = c.TCPConn.Close()
			return
		}
		_ = c.TCPConn.SetReadDeadline(time.Now().Add(lingerFor))
		stop := context.AfterFunc(c.l.closed, func() { _ = c.TCPConn.SetReadDeadline(time.Now()) })
		go func() {
			defer func() { <-c.l.slots }()
			defer stop()
			_, _ = io.Copy(io.Discard, io.LimitReader(c.TCPConn, lingerBytes))
			_ = c.TCPConn.Close()
		}()
	})
	return err
}
