package connlimit

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// HandlerOptions are the per-request deadlines [Handler] sets. A duration at
// zero or below sets no deadline.
//
// The write deadline replaces http.Server's WriteTimeout, which applies to
// every response alike: one short enough to matter would cut the longest
// legitimate answers (a synchronous tool call that waits for its job) and
// every long-lived stream. The body deadline is what http.Server's
// ReadTimeout would give once the headers are read; it is set here, where
// the Listener also learns that the connection waits for its body.
type HandlerOptions struct {
	// BodyTimeout bounds reading a request's body, from the moment the
	// handler is called. The server lifts the deadline once the body has
	// been read to its end (so that work after it is not cut); a body
	// still unread by then ends with a timeout error, and the connection
	// is closed.
	BodyTimeout time.Duration
	// WriteTimeout bounds writing a request's response, from the moment
	// the handler is called: it must cover the longest answer the server
	// gives (for jobbridge, the longest synchronous tool call).
	WriteTimeout time.Duration
	// LongLived reports the requests that open a long-lived stream (SSE).
	// They get no write deadline from Handler: the stream's handler, which
	// alone knows when it writes, sets its own deadline before each write
	// with http.NewResponseController(w).SetWriteDeadline, or clears it.
	// They still get the body deadline. Nil: no request is long-lived.
	LongLived func(*http.Request) bool
}

// Handler sets the deadlines of o on each request, then calls next. On a
// connection accepted by a [Listener] configured on the server, it also
// tells the Listener that the connection waits on its client until the
// request's body has been read, so that a connection stalled in its body may
// be closed to make room.
//
// The ResponseWriter next receives is the server's own, so next may still
// use http.NewResponseController to change either deadline.
func Handler(next http.Handler, o HandlerOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		now := time.Now()
		// Errors mean the writer cannot take deadlines; nothing more can
		// be done for it here. (net/http clears the write deadline after
		// each request, so a long-lived stream starts with none.)
		if o.WriteTimeout > 0 && (o.LongLived == nil || !o.LongLived(r)) {
			_ = rc.SetWriteDeadline(now.Add(o.WriteTimeout))
		}
		if hasBody(r) {
			tc, _ := r.Context().Value(connKey{}).(*trackedConn)
			if o.BodyTimeout > 0 {
				_ = rc.SetReadDeadline(now.Add(o.BodyTimeout))
			}
			done := func() {}
			if tc != nil {
				tc.l.setWaiting(tc, true)
				// At the body's end the server lifts the read deadline
				// (net/http clears it when it starts watching the
				// connection for a client that goes away), and the
				// connection no longer waits on its client.
				done = func() { tc.l.setWaiting(tc, false) }
			}
			// A body that timed out leaves the connection in the middle
			// of a request: the answer to it closes the connection
			// instead of keeping it for the idle time-out.
			r.Body = &trackedBody{ReadCloser: r.Body, done: done, timedOut: func() { w.Header().Set("Connection", "close") }}
		}
		next.ServeHTTP(w, r)
	})
}

// hasBody reports whether r has a body still to be read.
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// trackedBody calls done once, when its body has been read to the end, and
// timedOut when a read of it times out.
type trackedBody struct {
	io.ReadCloser
	once     sync.Once
	done     func()
	timedOut func()
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var ne net.Error
	switch {
	case err == io.EOF:
		b.once.Do(b.done)
	case errors.As(err, &ne) && ne.Timeout():
		b.timedOut()
	}
	return n, err
}
