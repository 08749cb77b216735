// Package connlimit keeps idle, slow or numerous client connections from
// starving an HTTP/1.1 server:
//
//   - [Listener] caps the connections open at once, in total and per client
//     address, at accept time. When a cap is reached it makes room by closing
//     the connection that has waited longest on its client (idle between
//     requests, stalled in its request headers, or stalled in its request
//     body), never one whose request is being worked on. Over the per-address
//     cap with nothing to close, the new connection is answered 503 and
//     closed; over the total cap with nothing to close, accepting waits until
//     a connection ends (new ones queue in the kernel's backlog).
//   - [Handler] gives each request a deadline for reading its body and one
//     for writing its response, set per request with [http.ResponseController]
//     so that the deadlines fit the request instead of the whole server, and
//     tells the Listener while a request is still waiting for its body.
//
// Install both: wrap the net.Listener with [NewListener], call
// [Listener.Configure] on the http.Server, and wrap its handler with
// [Handler]. The server's own ReadHeaderTimeout and IdleTimeout bound header
// reading and keep-alive waits; leave its ReadTimeout and WriteTimeout at
// zero (see [HandlerOptions] for why).
//
// Connections are tracked per HTTP/1.1 connection; with HTTP/2 one connection
// carries many requests and the body tracking does not apply.
package connlimit

import (
	"container/list"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// refusalText is the body of the answer to a connection refused over the
// per-address cap.
const refusalText = "too many connections from your address; retry later\n"

// refusal is written to a connection refused over the per-address cap.
var refusal = "HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Retry-After: 1\r\n" +
	"Connection: close\r\n" +
	"Content-Length: " + strconv.Itoa(len(refusalText)) + "\r\n" +
	"\r\n" + refusalText

// maxRefusing bounds the refused connections being answered at once: beyond
// it a refused connection is closed without an answer, so that a flood of
// refusals cannot hold file descriptors.
const maxRefusing = 64

// refuseLinger bounds how long a refused connection is kept to deliver the
// 503 before it is closed.
const refuseLinger = time.Second

// Options are a Listener's caps. A cap at zero or below is off.
type Options struct {
	// MaxConns caps the connections open at once.
	MaxConns int
	// MaxConnsPerAddr caps the connections open at once from one client
	// address: one IPv4 address, or one IPv6 /64 (what a single host is
	// usually given).
	MaxConnsPerAddr int
}

// Stats are a Listener's counters.
type Stats struct {
	// Open is how many accepted connections are open.
	Open int
	// Waiting is how many open connections wait on their client (idle,
	// or stalled in a request's headers or body) and may be closed to make
	// room.
	Waiting int
	// Shed counts the connections closed to make room for a new one.
	Shed uint64
	// Refused counts the connections refused over the per-address cap.
	Refused uint64
	// AcceptBlocked reports whether accepting is waiting for a connection
	// to end (the total cap is reached and no connection may be closed).
	AcceptBlocked bool
}

// Listener enforces connection caps on the connections it accepts. Create it
// with [NewListener]; it is safe for concurrent use.
type Listener struct {
	inner net.Listener
	opts  Options

	mu   sync.Mutex
	cond *sync.Cond
	open int
	// byAddr counts open connections per client address key.
	byAddr map[string]int
	// waiting holds the connections that wait on their client, in the
	// order they started waiting: the front has waited longest.
	waiting *list.List
	blocked bool
	closed  bool

	shed, refused atomic.Uint64
	refusing      atomic.Int32
}

// NewListener wraps inner with the caps of o.
func NewListener(inner net.Listener, o Options) *Listener {
	l := &Listener{inner: inner, opts: o, byAddr: map[string]int{}, waiting: list.New()}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// Addr returns the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// Close closes the inner listener and ends a waiting Accept.
func (l *Listener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.cond.Broadcast()
	l.mu.Unlock()
	return l.inner.Close()
}

// Stats returns the current counters.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Open: l.open, Waiting: l.waiting.Len(), Shed: l.shed.Load(), Refused: l.refused.Load(), AcceptBlocked: l.blocked}
}

// Accept waits for and returns the next connection within the caps. A new
// connection over a cap first makes room by closing the connection that has
// waited longest on its client (from the same address, for the per-address
// cap). With nothing to close, a connection over the per-address cap is
// answered 503 and closed, and one over the total cap waits until another
// connection ends or starts waiting on its client.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.inner.Accept()
		if err != nil {
			return nil, err
		}
		if tc, ok := l.admit(c); ok {
			return tc, nil
		}
		l.mu.Lock()
		closed := l.closed
		l.mu.Unlock()
		if closed {
			return nil, net.ErrClosed
		}
	}
}

// admit registers c within the caps, or refuses it (false).
func (l *Listener) admit(c net.Conn) (*trackedConn, bool) {
	key := addrKey(c.RemoteAddr())
	var victims []*trackedConn
	defer func() {
		for _, v := range victims {
			v.Conn.Close()
		}
	}()
	l.mu.Lock()
	if l.opts.MaxConnsPerAddr > 0 && l.byAddr[key] >= l.opts.MaxConnsPerAddr {
		v := l.longestWaitingLocked(key)
		if v == nil {
			l.mu.Unlock()
			l.refused.Add(1)
			l.refuse(c)
			return nil, false
		}
		l.releaseLocked(v)
		l.shed.Add(1)
		victims = append(victims, v)
	}
	for l.opts.MaxConns > 0 && l.open >= l.opts.MaxConns && !l.closed {
		if v := l.longestWaitingLocked(""); v != nil {
			l.releaseLocked(v)
			l.shed.Add(1)
			victims = append(victims, v)
			continue
		}
		if len(victims) > 0 {
			// Do not hold the victims' descriptors while waiting.
			l.mu.Unlock()
			for _, v := range victims {
				v.Conn.Close()
			}
			victims = nil
			l.mu.Lock()
			continue
		}
		l.blocked = true
		l.cond.Wait()
		l.blocked = false
	}
	if l.closed {
		l.mu.Unlock()
		c.Close()
		return nil, false
	}
	tc := &trackedConn{Conn: c, l: l, key: key}
	l.open++
	l.byAddr[key]++
	// A new connection waits on its client until its request headers are
	// read (the server reports it active).
	tc.elem = l.waiting.PushBack(tc)
	l.mu.Unlock()
	return tc, true
}

// refuse answers c 503 and closes it, without blocking Accept.
func (l *Listener) refuse(c net.Conn) {
	if l.refusing.Add(1) > maxRefusing {
		l.refusing.Add(-1)
		c.Close()
		return
	}
	go func() {
		defer l.refusing.Add(-1)
		defer c.Close()
		c.SetDeadline(time.Now().Add(refuseLinger))
		if _, err := io.WriteString(c, refusal); err != nil {
			return
		}
		// Half-close and drain what the client sent, so that closing does
		// not reset the connection before the client has read the answer.
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}()
}

// longestWaitingLocked returns the connection that has waited longest on its
// client, from address key ("" for any), or nil.
func (l *Listener) longestWaitingLocked(key string) *trackedConn {
	for e := l.waiting.Front(); e != nil; e = e.Next() {
		if tc := e.Value.(*trackedConn); key == "" || tc.key == key {
			return tc
		}
	}
	return nil
}

// releaseLocked forgets tc: it no longer counts against the caps.
func (l *Listener) releaseLocked(tc *trackedConn) {
	if tc.released {
		return
	}
	tc.released = true
	if tc.elem != nil {
		l.waiting.Remove(tc.elem)
		tc.elem = nil
	}
	l.open--
	if l.byAddr[tc.key]--; l.byAddr[tc.key] <= 0 {
		delete(l.byAddr, tc.key)
	}
	l.cond.Broadcast()
}

// setWaiting records whether tc waits on its client. A connection that
// starts waiting goes to the back of the queue.
func (l *Listener) setWaiting(tc *trackedConn, waiting bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if tc.released {
		return
	}
	if tc.elem != nil {
		l.waiting.Remove(tc.elem)
		tc.elem = nil
	}
	if waiting {
		tc.elem = l.waiting.PushBack(tc)
		if l.blocked {
			l.cond.Broadcast()
		}
	}
}

// Configure installs the Listener's hooks on srv: ConnState, which learns
// when a connection is idle or working, and ConnContext, which lets
// [Handler] find a request's connection. Hooks already set are kept and
// called first.
func (l *Listener) Configure(srv *http.Server) {
	prevState, prevContext := srv.ConnState, srv.ConnContext
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		if prevState != nil {
			prevState(c, s)
		}
		l.connState(c, s)
	}
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prevContext != nil {
			ctx = prevContext(ctx, c)
		}
		if tc, ok := c.(*trackedConn); ok && tc.l == l {
			ctx = context.WithValue(ctx, connKey{}, tc)
		}
		return ctx
	}
}

func (l *Listener) connState(c net.Conn, s http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok || tc.l != l {
		return
	}
	switch s {
	case http.StateActive, http.StateHijacked:
		// Request headers are read: the server works on the request (the
		// Handler reports a body still being waited for).
		l.setWaiting(tc, false)
	case http.StateIdle:
		l.setWaiting(tc, true)
	case http.StateClosed:
		l.mu.Lock()
		l.releaseLocked(tc)
		l.mu.Unlock()
	}
}

// trackedConn is an accepted connection counted against the caps.
type trackedConn struct {
	net.Conn
	l   *Listener
	key string
	// elem and released are guarded by l.mu. elem is set while the
	// connection waits on its client.
	elem     *list.Element
	released bool
}

// Close closes the connection and frees its place.
func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// CloseWrite half-closes the connection when the inner one can.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

type connKey struct{}

// addrKey is the client address a connection counts against: the IP for
// IPv4, the /64 for IPv6.
func addrKey(a net.Addr) string {
	if a == nil {
		return ""
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		host, _, err := net.SplitHostPort(a.String())
		if err != nil {
			return a.String()
		}
		return host
	}
	ip := ap.Addr().Unmap()
	if ip.Is6() {
		p, _ := ip.WithZone("").Prefix(64)
		return p.String()
	}
	return ip.String()
}
