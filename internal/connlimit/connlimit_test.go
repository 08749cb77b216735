package connlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// pipeListener is a net.Listener whose connections are in-memory pipes with
// a chosen client address, so that tests can play clients from several
// hosts.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	port  int
	mu    sync.Mutex
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn, 16), done: make(chan struct{})}
}

func (p *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *pipeListener) Close() error { p.once.Do(func() { close(p.done) }); return nil }

func (p *pipeListener) Addr() net.Addr { return pipeAddr("127.0.0.1:80") }

// dial opens a connection from ip; it is accepted asynchronously.
func (p *pipeListener) dial(t *testing.T, ip string) *rawClient {
	t.Helper()
	p.mu.Lock()
	p.port++
	port := p.port
	p.mu.Unlock()
	server, client := net.Pipe()
	p.conns <- &addrConn{Conn: server, remote: pipeAddr(net.JoinHostPort(ip, fmt.Sprint(40000+port)))}
	t.Cleanup(func() { client.Close() })
	return &rawClient{c: client, br: bufio.NewReader(client)}
}

type pipeAddr string

func (a pipeAddr) Network() string { return "tcp" }
func (a pipeAddr) String() string  { return string(a) }

type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c *addrConn) RemoteAddr() net.Addr { return c.remote }

// rawClient speaks HTTP/1.1 by hand, so that it can stall anywhere.
type rawClient struct {
	c  net.Conn
	br *bufio.Reader
}

func (r *rawClient) send(t *testing.T, s string) {
	t.Helper()
	go func() { io.WriteString(r.c, s) }() // a pipe write waits for the reader
}

// response reads the next response within 5s.
func (r *rawClient) response() (status int, body string, err error) {
	r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// closedByServer reports whether the server closed the connection (reading
// ends with EOF), waiting up to 5s.
func (r *rawClient) closedByServer() bool {
	r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, r.br)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// testServer serves a few handlers behind a Listener on a pipeListener.
type testServer struct {
	pl      *pipeListener
	l       *Listener
	release chan struct{} // closing it ends /busy requests
	started chan string   // /busy and /body report their start
}

func startServer(t *testing.T, o Options, h HandlerOptions) *testServer {
	t.Helper()
	ts := &testServer{pl: newPipeListener(), release: make(chan struct{}), started: make(chan string, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/busy", func(w http.ResponseWriter, r *http.Request) {
		ts.started <- "busy"
		select {
		case <-ts.release:
			io.WriteString(w, "done")
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/body", func(w http.ResponseWriter, r *http.Request) {
		ts.started <- "body"
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d bytes", len(b))
	})
	// /slow reads its body, then works for 2 body timeouts.
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		time.Sleep(2 * h.BodyTimeout)
		if err := r.Context().Err(); err != nil {
			http.Error(w, "request cancelled: "+err.Error(), http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "worked")
	})
	// /late answers after 3 write timeouts.
	mux.HandleFunc("/late", func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(3 * h.WriteTimeout)
		io.WriteString(w, "late")
	})
	ts.l = NewListener(ts.pl, o)
	srv := &http.Server{Handler: Handler(mux, h), ReadHeaderTimeout: 10 * time.Second}
	ts.l.Configure(srv)
	go srv.Serve(ts.l)
	t.Cleanup(func() {
		select {
		case <-ts.release:
		default:
			close(ts.release)
		}
		srv.Close()
	})
	return ts
}

// eventually waits up to 5s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (ts *testServer) waitStarted(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-ts.started:
		if got != want {
			t.Fatalf("handler %q started, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("handler %q never started", want)
	}
}

// TestShedsTheConnectionWaitingLongest: at a cap, a new connection is
// served by closing a connection that waits on its client (idle, or stalled
// in its headers or its body), never one whose request is being worked on.
func TestShedsTheConnectionWaitingLongest(t *testing.T) {
	waiting := []struct {
		name string
		make func(t *testing.T, ts *testServer, c *rawClient)
	}{
		{"idle after a response", func(t *testing.T, ts *testServer, c *rawClient) {
			c.send(t, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
			if status, _, err := c.response(); err != nil || status != 200 {
				t.Fatalf("GET /ok: %d %v", status, err)
			}
			eventually(t, "the connection to be idle", func() bool { return ts.l.Stats().Waiting == 1 })
		}},
		{"stalled in its headers", func(t *testing.T, ts *testServer, c *rawClient) {
			c.send(t, "GET /ok HTTP/1.1\r\nHost: x\r\n")
			eventually(t, "the connection to be accepted", func() bool { return ts.l.Stats().Open == 2 })
		}},
		{"stalled in its body", func(t *testing.T, ts *testServer, c *rawClient) {
			c.send(t, "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
			ts.waitStarted(t, "body")
			if w := ts.l.Stats().Waiting; w != 1 {
				t.Fatalf("%d connections wait on their client, want 1", w)
			}
		}},
	}
	caps := []struct {
		name string
		opts Options
		ips  [3]string // busy, waiting, new
	}{
		{"per address", Options{MaxConnsPerAddr: 2}, [3]string{"192.0.2.1", "192.0.2.1", "192.0.2.1"}},
		{"total", Options{MaxConns: 2}, [3]string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}},
	}
	for _, cp := range caps {
		for _, wt := range waiting {
			t.Run(cp.name+"/"+wt.name, func(t *testing.T) {
				ts := startServer(t, cp.opts, HandlerOptions{})
				busy := ts.pl.dial(t, cp.ips[0])
				busy.send(t, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n")
				ts.waitStarted(t, "busy")
				waiter := ts.pl.dial(t, cp.ips[1])
				wt.make(t, ts, waiter)

				newcomer := ts.pl.dial(t, cp.ips[2])
				newcomer.send(t, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
				if status, body, err := newcomer.response(); err != nil || status != 200 || body != "ok" {
					t.Fatalf("new connection: %d %q %v, want 200 ok", status, body, err)
				}
				if !waiter.closedByServer() {
					t.Error("the waiting connection was kept open")
				}
				close(ts.release)
				if status, body, err := busy.response(); err != nil || status != 200 || body != "done" {
					t.Errorf("busy connection: %d %q %v, want its answer", status, body, err)
				}
				if s := ts.l.Stats(); s.Shed != 1 {
					t.Errorf("Shed = %d, want 1", s.Shed)
				}
			})
		}
	}
}

// TestRefusesOverAddressCapWhenNoneWaits: over the per-address cap with
// every connection of the address busy, a new one is answered 503 and
// closed, while other addresses are served.
func TestRefusesOverAddressCapWhenNoneWaits(t *testing.T) {
	ts := startServer(t, Options{MaxConnsPerAddr: 1, MaxConns: 10}, HandlerOptions{})
	busy := ts.pl.dial(t, "192.0.2.1")
	busy.send(t, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n")
	ts.waitStarted(t, "busy")

	refused := ts.pl.dial(t, "192.0.2.1")
	refused.send(t, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
	status, body, err := refused.response()
	if err != nil || status != http.StatusServiceUnavailable || !strings.Contains(body, "too many connections") {
		t.Errorf("over the cap: %d %q %v, want 503", status, body, err)
	}
	if !refused.closedByServer() {
		t.Error("the refused connection was kept open")
	}
	other := ts.pl.dial(t, "192.0.2.2")
	other.send(t, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
	if status, _, err := other.response(); err != nil || status != 200 {
		t.Errorf("another address: %d %v, want 200", status, err)
	}
	close(ts.release)
	if status, _, err := busy.response(); err != nil || status != 200 {
		t.Errorf("busy connection: %d %v, want 200", status, err)
	}
	if s := ts.l.Stats(); s.Refused != 1 || s.Shed != 0 {
		t.Errorf("Refused, Shed = %d, %d, want 1, 0", s.Refused, s.Shed)
	}
}

// TestTotalCapWaitsForBusyConnections: at the total cap with every
// connection busy, accepting waits; the new connection is served once one
// of them is done.
func TestTotalCapWaitsForBusyConnections(t *testing.T) {
	ts := startServer(t, Options{MaxConns: 1}, HandlerOptions{})
	busy := ts.pl.dial(t, "192.0.2.1")
	busy.send(t, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n")
	ts.waitStarted(t, "busy")

	next := ts.pl.dial(t, "192.0.2.2")
	next.send(t, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
	eventually(t, "accepting to wait", func() bool { return ts.l.Stats().AcceptBlocked })
	close(ts.release)
	if status, _, err := busy.response(); err != nil || status != 200 {
		t.Errorf("busy connection: %d %v, want 200", status, err)
	}
	if status, body, err := next.response(); err != nil || status != 200 || body != "ok" {
		t.Errorf("waiting connection: %d %q %v, want 200 ok", status, body, err)
	}
	if s := ts.l.Stats(); s.Open != 1 || s.AcceptBlocked {
		t.Errorf("stats %+v, want 1 open (the idle first connection was shed) and accept not blocked", s)
	}
}

// TestClosedConnectionsFreeTheirPlace: connections the client or server
// closes no longer count against the caps.
func TestClosedConnectionsFreeTheirPlace(t *testing.T) {
	ts := startServer(t, Options{MaxConnsPerAddr: 1, MaxConns: 1}, HandlerOptions{})
	for i := range 5 {
		c := ts.pl.dial(t, "192.0.2.1")
		c.send(t, "GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if status, _, err := c.response(); err != nil || status != 200 {
			t.Fatalf("connection %d: %d %v, want 200", i, status, err)
		}
		if !c.closedByServer() {
			t.Fatalf("connection %d: not closed after Connection: close", i)
		}
		eventually(t, "the connection to be forgotten", func() bool { return ts.l.Stats().Open == 0 })
	}
	if s := ts.l.Stats(); s.Shed != 0 || s.Refused != 0 {
		t.Errorf("stats %+v, want nothing shed or refused", s)
	}
}

// TestHandlerDeadlines: the body must arrive within BodyTimeout, and the
// answer within WriteTimeout unless the request is a long-lived stream; a
// handler that works past the body deadline after reading its body is not
// cancelled.
func TestHandlerDeadlines(t *testing.T) {
	opts := HandlerOptions{
		BodyTimeout:  100 * time.Millisecond,
		WriteTimeout: 300 * time.Millisecond,
		LongLived:    func(r *http.Request) bool { return r.Header.Get("Accept") == "text/event-stream" },
	}
	for _, tc := range []struct {
		name    string
		request string
		// status 0: the connection is closed without an answer.
		status int
		body   string
	}{
		{"a stalled body ends the request", "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789", 400, "reading the body: "},
		{"a body in time is read", "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789", 200, "10 bytes"},
		{"work after the body outlives the body deadline", "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", 200, "worked"},
		{"an answer past the write deadline is cut", "GET /late HTTP/1.1\r\nHost: x\r\n\r\n", 0, ""},
		{"a long-lived stream sets its own write deadline", "GET /late HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n", 200, "late"},
		{"a long-lived stream after another request", "GET /ok HTTP/1.1\r\nHost: x\r\n\r\nGET /late HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n", 200, "late"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, Options{MaxConns: 10}, opts)
			go func() {
				for range ts.started {
				}
			}()
			c := ts.pl.dial(t, "192.0.2.1")
			c.send(t, tc.request)
			status, body, err := c.response()
			if n := strings.Count(tc.request, "HTTP/1.1\r\n"); n == 2 && err == nil {
				status, body, err = c.response() // the second answer
			}
			if tc.status == 0 {
				if err == nil {
					t.Fatalf("got %d %q, want the connection closed", status, body)
				}
				return
			}
			if err != nil || status != tc.status || !strings.HasPrefix(body, tc.body) {
				t.Fatalf("got %d %q %v, want %d %q", status, body, err, tc.status, tc.body)
			}
		})
	}
}

func TestAddrKey(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"192.0.2.1:1000", "192.0.2.1:2000"},
		{"[::ffff:192.0.2.1]:1000", "192.0.2.1:2000"},
		{"[2001:db8:1:2:aaaa::1]:1000", "[2001:db8:1:2:bbbb::9]:2000"},
	} {
		if ka, kb := addrKey(pipeAddr(tc.a)), addrKey(pipeAddr(tc.b)); ka != kb {
			t.Errorf("%s and %s count as %q and %q, want one address", tc.a, tc.b, ka, kb)
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"192.0.2.1:1000", "192.0.2.2:1000"},
		{"[2001:db8:1:2::1]:1000", "[2001:db8:1:3::1]:1000"},
	} {
		if ka, kb := addrKey(pipeAddr(tc.a)), addrKey(pipeAddr(tc.b)); ka == kb {
			t.Errorf("%s and %s both count as %q, want two addresses", tc.a, tc.b, ka)
		}
	}
}
