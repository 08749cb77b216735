package postgres

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobbridge/jobbridge/mapping"
)

// listenTimings paces a listener; zero fields take the defaults below.
type listenTimings struct {
	// heartbeat is how long the listener waits for a notification before
	// it pings the server.
	heartbeat time.Duration
	// minBackoff and maxBackoff bound the waits between reconnection
	// attempts after the first, which is immediate; each failed attempt
	// doubles the wait.
	minBackoff, maxBackoff time.Duration
}

// The default listener timings.
const (
	defaultHeartbeat  = 30 * time.Second
	defaultMinBackoff = 100 * time.Millisecond
	defaultMaxBackoff = 10 * time.Second
	// pingTimeout bounds a heartbeat ping and a connection attempt's
	// LISTEN: a server that does not answer in time is taken for lost.
	pingTimeout = 10 * time.Second
	// closeTimeout bounds the goodbye to the server when a connection is
	// given up.
	closeTimeout = 5 * time.Second
)

// listener holds a connection of its own that LISTENs on a store's change
// channel and publishes what it hears to the store's feed, reconnecting
// whenever the connection is lost (see the package comment).
type listener struct {
	config  *pgx.ConnConfig
	channel string
	feed    *mapping.Feed
	// own are the pool's backend process IDs, whose notifications the
	// feed had at commit.
	own     *pidSet
	timings listenTimings

	// ctx is the listener's lifetime, which close ends: the listener runs
	// for the store's life, not for a request's.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	// pid is the backend process ID of the current connection; 0 while
	// reconnecting.
	pid uint32
}

// listen connects and LISTENs on channel once, failing if it cannot, and
// then keeps listening in a goroutine of its own until close.
func listen(ctx context.Context, config *pgx.ConnConfig, channel string, feed *mapping.Feed, own *pidSet, timings listenTimings) (*listener, error) {
	if timings.heartbeat <= 0 {
		timings.heartbeat = defaultHeartbeat
	}
	if timings.minBackoff <= 0 {
		timings.minBackoff = defaultMinBackoff
	}
	if timings.maxBackoff < timings.minBackoff {
		timings.maxBackoff = max(defaultMaxBackoff, timings.minBackoff)
	}
	l := &listener{config: config, channel: channel, feed: feed, own: own, timings: timings, done: make(chan struct{})}
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, err
	}
	// The listener outlives Open's context on purpose: it belongs to the
	// store, whose Close ends it.
	l.ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go l.run(conn)
	return l, nil
}

// close stops the listener and waits for it to close its connection.
func (l *listener) close() {
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
}

// backendPID returns the backend process ID of the listener's current
// connection, 0 while it reconnects.
func (l *listener) backendPID() uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pid
}

// connect opens a connection and LISTENs on the channel.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.config.Copy())
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if _, err := conn.Exec(lctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		l.hangUp(ctx, conn)
		return nil, err
	}
	l.mu.Lock()
	l.pid = conn.PgConn().PID()
	l.mu.Unlock()
	return conn, nil
}

// hangUp closes conn, whatever state it is in, taking ctx's values but
// not its end: the goodbye is bounded by closeTimeout.
func (l *listener) hangUp(ctx context.Context, conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	_ = conn.Close(ctx)
	l.mu.Lock()
	l.pid = 0
	l.mu.Unlock()
}

// run receives on conn, and on each loss reconnects and publishes a
// resync, until close.
func (l *listener) run(conn *pgx.Conn) {
	defer close(l.done)
	for {
		l.receive(conn)
		l.hangUp(l.ctx, conn)
		if conn = l.reconnect(); conn == nil {
			return
		}
		// LISTEN is in place again: whatever was sent meanwhile is lost,
		// and the subscribers re-read now.
		l.feed.Publish(mapping.Change{Resync: true})
	}
}

// receive publishes the notifications conn receives until the connection
// fails or the listener closes. A heartbeat without notifications ends in a
// ping, which finds a connection that died silently.
func (l *listener) receive(conn *pgx.Conn) {
	for {
		wctx, cancel := context.WithTimeout(l.ctx, l.timings.heartbeat)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if n != nil {
			l.deliver(n)
		}
		if l.ctx.Err() != nil || conn.IsClosed() {
			return
		}
		if err == nil {
			continue
		}
		// The heartbeat ran out (a timeout leaves the connection open):
		// make sure the server is still there.
		pctx, cancel := context.WithTimeout(l.ctx, pingTimeout)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			return
		}
	}
}

// reconnect connects again, at once and then with growing, jittered waits,
// until it succeeds (returning the connection) or the listener closes
// (returning nil).
func (l *listener) reconnect() *pgx.Conn {
	wait := time.Duration(0)
	for {
		if wait > 0 {
			// Half the wait and a random part of the other half, so that
			// replicas that lost the server together do not return
			// together.
			t := time.NewTimer(wait/2 + rand.N(wait/2+1))
			select {
			case <-l.ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
		if l.ctx.Err() != nil {
			return nil
		}
		cctx, cancel := context.WithTimeout(l.ctx, pingTimeout)
		conn, err := l.connect(cctx)
		cancel()
		if err == nil {
			return conn
		}
		wait = min(max(2*wait, l.timings.minBackoff), l.timings.maxBackoff)
	}
}

// deliver publishes the change a notification names, unless one of the
// store's own connections sent it (the store published it at commit) or
// its payload is not one the trigger writes.
func (l *listener) deliver(n *pgconn.Notification) {
	if n.Channel != l.channel || l.own.has(n.PID) {
		return
	}
	c, ok := parsePayload(n.Payload)
	if !ok {
		return
	}
	l.feed.Publish(c)
}

// parsePayload parses the trigger's payload "KEY:VERSION", the key in hex.
func parsePayload(p string) (mapping.Change, bool) {
	k, v, ok := strings.Cut(p, ":")
	var c mapping.Change
	if !ok || hex.DecodedLen(len(k)) != len(c.Key) {
		return c, false
	}
	if _, err := hex.Decode(c.Key[:], []byte(k)); err != nil {
		return c, false
	}
	version, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return c, false
	}
	c.Version = version
	return c, true
}
