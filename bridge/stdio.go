package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdio hygiene. Clients spawn a stdio server, often only to probe it, and
// stop it by closing its stdin or by a signal; a shell pipes a few requests
// into it and closes its stdin at once. Both are an ordinary end, not an
// error, and the requests read before the end are still answered.

// shutdownGrace bounds how long a stdio session stopped by its context
// waits for the handlers of the requests it cancelled to return.
const shutdownGrace = 5 * time.Second

// ServeIO serves MCP as newline-delimited JSON-RPC over in and out until ctx
// is done or in ends, as ServeStdio does over stdin and stdout. At the end of
// in, every request already read is answered before ServeIO returns (within
// the time the slowest synchronous call may take). When ctx is done, the
// session ends at once: the requests in flight are cancelled unanswered (a
// synchronous call cancels its job downstream, which Close waits for).
// Either end returns nil; input that cannot be read (a line that is not
// JSON) ends the session too, after the answers, with an error. in is
// closed, out is not.
func (b *Bridge) ServeIO(ctx context.Context, in io.ReadCloser, out io.Writer) error {
	t := &stdioTransport{
		b:       b,
		inner:   &mcp.IOTransport{Reader: in, Writer: nopWriteCloser{out}},
		rewrite: b.rewriteIncoming,
		drain:   b.drainBudget(),
		stop:    ctx,
		log:     b.log,
	}
	// The session's own context is not cancelled by ctx: the transport ends
	// the session instead, its Read reporting the end of input.
	ss, err := b.server.Connect(context.WithoutCancel(ctx), t, nil)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case err := <-ended:
		if err = quietEnd(err); err != nil {
			return fmt.Errorf("stdio session: %w", err)
		}
		b.log.Info("stdio session ended: the client closed its input")
		return nil
	case <-ctx.Done():
	}
	if c := t.conn.Load(); c != nil {
		c.endStreams()
	}
	// The transport's Read returns the end of input now: the SDK cancels
	// the requests in flight and closes the connection once their handlers
	// have returned.
	grace := time.NewTimer(shutdownGrace)
	defer grace.Stop()
	select {
	case <-ended:
		b.log.Info("stdio session ended: shutting down")
	case <-grace.C:
		b.log.Warn("stdio session ended with request handlers still running", "after", shutdownGrace)
		go ss.Close() // it waits for those handlers
	}
	return nil
}

// quietEnd drops the errors that only say the connection is gone.
func quietEnd(err error) error {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return err
}

// drainBudget bounds how long the end of a stdio client's input waits for
// the requests read before it: the slowest synchronous call (its submission,
// its budget and a last poll) and a margin.
func (b *Bridge) drainBudget() time.Duration {
	var budget time.Duration
	for _, t := range b.currentTools() {
		budget = max(budget, t.SyncBudget)
	}
	return b.opts.SubmitTimeout + budget + b.opts.CallTimeout + 5*time.Second
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// stdioTransport wraps the transport of a stdio session. Its connection
// hands every message it reads through rewrite. At the end of its input it
// reports the end only once every request read so far has been answered, or
// drain has passed; when stop is done, at once.
//
// The wrapped connection does not see the session's negotiated protocol
// version (the SDK tells it through an unexported method), so JSON-RPC
// batches, which the SDK refuses from 2025-06-18 on, are taken under every
// version.
type stdioTransport struct {
	b       *Bridge
	inner   mcp.Transport
	rewrite func(jsonrpc.Message) jsonrpc.Message
	drain   time.Duration
	stop    context.Context
	log     *slog.Logger
	// conn is the connection, once connected.
	conn atomic.Pointer[stdioConn]
}

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	conn := &stdioConn{
		Connection: c,
		t:          t,
		pending:    map[jsonrpc.ID]bool{},
		answered:   make(chan struct{}, 1),
		closed:     make(chan struct{}),
		listens:    map[jsonrpc.ID]context.CancelFunc{},
		ending:     make(chan struct{}),
	}
	t.conn.Store(conn)
	return conn, nil
}

// stdioConn is the connection of a stdioTransport. It counts the requests it
// has read and not yet answered.
type stdioConn struct {
	mcp.Connection
	t *stdioTransport

	mu      sync.Mutex
	pending map[jsonrpc.ID]bool // requests read and not answered
	// answered receives a token whenever a pending request is answered.
	answered  chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
	// listens are the subscriptions/listen streams of tasks this session
	// holds, by request ID; streams counts their goroutines, and closing
	// ending ends them gracefully.
	listens    map[jsonrpc.ID]context.CancelFunc
	streams    sync.WaitGroup
	ending     chan struct{}
	endingOnce sync.Once
}

// endStreams ends the session's streams gracefully (notifications/cancelled
// for each) and waits up to a second for those messages to be written.
func (c *stdioConn) endStreams() {
	c.endingOnce.Do(func() { close(c.ending) })
	done := make(chan struct{})
	go func() { c.streams.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
}

func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	// The SDK's context never ends; stop does.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	unwatch := context.AfterFunc(c.t.stop, cancel)
	defer unwatch()
	var msg jsonrpc.Message
	for {
		m, err := c.Connection.Read(rctx)
		if err != nil {
			if c.t.stop.Err() != nil {
				return nil, io.EOF
			}
			// Nothing more can be read (the end of input, or a line that is
			// not JSON): answer what was read, then end.
			c.awaitAnswers()
			return nil, err
		}
		if !c.takeListen(m) {
			msg = m
			break
		}
	}
	msg = c.t.rewrite(msg)
	if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() && r.Method != "subscriptions/listen" {
		// A subscription is answered only when it is torn down; the end of
		// input does not wait for it.
		c.mu.Lock()
		c.pending[r.ID] = true
		c.mu.Unlock()
	}
	return msg, nil
}

func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, uncarryMessage(msg)) // legacypush.go
	if r, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		if c.pending[r.ID] {
			delete(c.pending, r.ID)
			select {
			case c.answered <- struct{}{}:
			default:
			}
		}
		c.mu.Unlock()
	}
	return err
}

func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		// Streams end gracefully while the connection can still carry it.
		c.endStreams()
		c.mu.Lock()
		for _, cancel := range c.listens {
			cancel()
		}
		c.mu.Unlock()
	})
	return c.Connection.Close()
}

// takeListen serves the subscriptions/listen requests that name tasks (and
// the client's notifications/cancelled that end them) in place of the SDK,
// which does not know task notifications. It reports whether it took msg.
func (c *stdioConn) takeListen(msg jsonrpc.Message) bool {
	r, ok := msg.(*jsonrpc.Request)
	if !ok {
		return false
	}
	switch {
	case r.Method == "notifications/cancelled" && !r.IsCall():
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(r.Params, &p) != nil {
			return false
		}
		id, err := jsonrpc.MakeID(p.RequestID)
		if err != nil {
			return false
		}
		c.mu.Lock()
		cancel, mine := c.listens[id]
		delete(c.listens, id)
		c.mu.Unlock()
		if mine {
			cancel()
		}
		return mine
	case r.Method == "subscriptions/listen" && r.IsCall():
	default:
		return false
	}
	rawID, _ := json.Marshal(r.ID.Raw())
	req, named, err := parseListen(rawID, r.Params)
	if !named {
		return false
	}
	b := c.t.b
	ctx, cancel := context.WithCancel(context.Background())
	answer := func(err error) {
		var rpc *jsonrpc.Error
		if !errors.As(err, &rpc) {
			rpc = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		c.Connection.Write(ctx, &jsonrpc.Response{ID: r.ID, Error: rpc})
	}
	if err != nil {
		answer(err)
		cancel()
		return true
	}
	s, agreed, err := b.startListen(ctx, b.opts.StdioPrincipal, req)
	if err != nil {
		answer(err)
		cancel()
		return true
	}
	c.mu.Lock()
	c.listens[r.ID] = cancel
	c.mu.Unlock()
	c.streams.Add(1)
	go func() {
		defer c.streams.Done()
		defer cancel()
		sink := &stdioSink{ctx: ctx, conn: c.Connection, id: r.ID}
		b.runListen(ctx, s, req, agreed, sink, c.ending)
		c.mu.Lock()
		delete(c.listens, r.ID)
		c.mu.Unlock()
	}()
	return true
}

func (c *stdioConn) unanswered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// awaitAnswers waits until every request read has been answered, the drain
// budget has passed, stop is done or the connection is closed.
func (c *stdioConn) awaitAnswers() {
	n := c.unanswered()
	if n == 0 {
		return
	}
	c.t.log.Info("end of input; answering the requests already read", "requests", n)
	deadline := time.NewTimer(c.t.drain)
	defer deadline.Stop()
	for c.unanswered() > 0 {
		select {
		case <-c.answered:
		case <-deadline.C:
			c.t.log.Warn("end of input; giving up on requests not answered in time", "requests", c.unanswered(), "after", c.t.drain)
			return
		case <-c.t.stop.Done():
			return
		case <-c.closed:
			return
		}
	}
}
