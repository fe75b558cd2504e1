package faultproxy

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Down takes the proxy off the network: its listening socket is closed,
// so new connections are refused (ECONNREFUSED), and the connections it
// has are closed. Up brings it back on the same address. Rules are not
// involved: this is the upstream gone, as a client sees it.
func (p *Proxy) Down() {
	p.ln.down()
	p.srv.CloseClientConnections()
}

// Up listens again on the proxy's address after Down; it fails t if the
// address cannot be had back within a few seconds.
func (p *Proxy) Up(t testing.TB) {
	t.Helper()
	if err := p.ln.up(); err != nil {
		t.Fatalf("faultproxy: listen again on %s: %v", p.ln.addr, err)
	}
}

// switchListener is a net.Listener that can be closed and opened again on
// the same address while the http.Server's Accept loop waits in it.
type switchListener struct {
	addr net.Addr

	mu     sync.Mutex
	cur    net.Listener  // nil while down
	change chan struct{} // closed and replaced at each up or close
	closed bool
}

func newSwitchListener() (*switchListener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &switchListener{addr: ln.Addr(), cur: ln, change: make(chan struct{})}, nil
}

func (l *switchListener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		cur, change, closed := l.cur, l.change, l.closed
		l.mu.Unlock()
		if closed {
			return nil, net.ErrClosed
		}
		if cur == nil {
			<-change
			continue
		}
		c, err := cur.Accept()
		if err == nil {
			return c, nil
		}
		l.mu.Lock()
		same := l.cur == cur && !l.closed
		l.mu.Unlock()
		if same {
			return nil, err
		}
		// Closed by down or Close: wait for what comes next.
	}
}

func (l *switchListener) down() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != nil {
		l.cur.Close()
		l.cur = nil
	}
}

func (l *switchListener) up() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != nil || l.closed {
		return nil
	}
	var err error
	for range 50 { // the port may take a moment to be free again
		var ln net.Listener
		if ln, err = net.Listen("tcp", l.addr.String()); err == nil {
			l.cur = ln
			close(l.change)
			l.change = make(chan struct{})
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func (l *switchListener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	close(l.change)
	if l.cur != nil {
		return l.cur.Close()
	}
	return nil
}

func (l *switchListener) Addr() net.Addr { return l.addr }
