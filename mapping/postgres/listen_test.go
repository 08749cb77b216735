package postgres

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobbridge/jobbridge/mapping"
)

// waitLimit bounds how long a test waits for something it expects; only a
// failing test reaches it.
const waitLimit = 30 * time.Second

// changes collects what a subscription reports.
type changes struct {
	mu   sync.Mutex
	all  []mapping.Change
	seen chan struct{}
}

// subscribe records s's changes until the test ends.
func subscribe(t *testing.T, s mapping.Store) *changes {
	t.Helper()
	c := &changes{seen: make(chan struct{}, 1)}
	t.Cleanup(s.Subscribe(func(ch mapping.Change) {
		c.mu.Lock()
		c.all = append(c.all, ch)
		c.mu.Unlock()
		select {
		case c.seen <- struct{}{}:
		default:
		}
	}))
	return c
}

// waitUntil waits until ok holds for the changes so far, failing t after
// waitLimit with what, the thing expected.
func (c *changes) waitUntil(t *testing.T, what string, ok func([]mapping.Change) bool) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		done := ok(c.all)
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-c.seen:
		case <-deadline.C:
			t.Fatalf("no %s within %v", what, waitLimit)
		}
	}
}

// waitFor waits for a change of key to version.
func (c *changes) waitFor(t *testing.T, key mapping.Key, version int64) {
	t.Helper()
	c.waitUntil(t, fmt.Sprintf("change to version %d", version), func(all []mapping.Change) bool {
		for _, ch := range all {
			if ch.Key == key && ch.Version == version && !ch.Resync {
				return true
			}
		}
		return false
	})
}

// keys returns the keys of the changes so far.
func (c *changes) keys() map[mapping.Key]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ks := map[mapping.Key]bool{}
	for _, ch := range c.all {
		ks[ch.Key] = true
	}
	return ks
}

func TestChangesChannel(t *testing.T) {
	fits := strings.Repeat("s", maxChannelLen-len(channelPrefix))
	tests := []struct {
		schema string
		want   string
	}{
		{"public", "jobbridge.tasks.public"},
		{"Tenant A", "jobbridge.tasks.Tenant A"},
		{fits, channelPrefix + fits},
	}
	for _, tt := range tests {
		if got := changesChannel(tt.schema); got != tt.want {
			t.Errorf("changesChannel(%q) = %q, want %q", tt.schema, got, tt.want)
		}
	}
	long1, long2 := fits+"1", fits+"2"
	c1, c2 := changesChannel(long1), changesChannel(long2)
	if len(c1) > maxChannelLen || !strings.HasPrefix(c1, channelPrefix) || c1 == c2 {
		t.Errorf("channels of long schemas %q and %q: want distinct names of at most %d bytes with the prefix", c1, c2, maxChannelLen)
	}
}

// withSearchPath returns dsn with search_path set to schema.
func withSearchPath(t *testing.T, dsn, schema string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestStoresOnOtherSchemasDoNotHearEachOther opens stores on two schemas of
// one database, one whose name is too long for a channel of its own: each
// store hears the writes of its schema's other store, never the other
// schema's. (Other databases are apart anyway: NOTIFY does not leave its
// database.)
func TestStoresOnOtherSchemasDoNotHearEachOther(t *testing.T) {
	dsn := newDatabase(t)
	short := "tenant_a"
	long := "tenant_" + strings.Repeat("b", maxChannelLen)
	admin, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, schema := range []string{short, long} {
		if _, err := admin.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	_ = admin.Close(t.Context())

	a, aPeer := openAt(t, withSearchPath(t, dsn, short)), openAt(t, withSearchPath(t, dsn, short))
	b, bPeer := openAt(t, withSearchPath(t, dsn, long)), openAt(t, withSearchPath(t, dsn, long))
	heardA, heardB := subscribe(t, a), subscribe(t, b)

	now := time.Now()
	inA, inB := task("in-a", now), task("in-b", now)
	mustCreate(t, bPeer, inB)
	mustCreate(t, aPeer, inA)
	heardA.waitFor(t, inA.Key, 0)
	heardB.waitFor(t, inB.Key, 0)
	// Both were committed before heardA's was heard, and notifications of
	// one database arrive in commit order: B's would have been heard by
	// now, and vice versa.
	markerB := task("marker-b", now)
	mustCreate(t, bPeer, markerB)
	heardB.waitFor(t, markerB.Key, 0)
	if heardA.keys()[inB.Key] {
		t.Error("a store heard a write of another schema")
	}
	if heardB.keys()[inA.Key] {
		t.Error("a store heard a write of another schema")
	}
}

func TestListenerReconnectsAfterItsConnectionIsKilled(t *testing.T) {
	dsn := newDatabase(t)
	s, peer := openAt(t, dsn), openAt(t, dsn)
	heard := subscribe(t, s)
	now := time.Now()
	before := task("before", now)
	mustCreate(t, peer, before)
	heard.waitFor(t, before.Key, 0)

	pid := s.listener.backendPID()
	var killed bool
	if err := peer.pool.QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminating the listener's backend %d: %v, %v", pid, killed, err)
	}
	heard.waitUntil(t, "resync", func(all []mapping.Change) bool {
		for _, c := range all {
			if c.Resync {
				return c.Key == mapping.Key{} && c.Version == 0
			}
		}
		return false
	})
	if got := s.listener.backendPID(); got == pid {
		t.Errorf("the listener still reports backend %d after reconnecting", pid)
	}

	// Listening again: the peer's writes are heard once more.
	after := task("after", now)
	mustCreate(t, peer, after)
	heard.waitFor(t, after.Key, 0)
}

// TestListenerHeartbeat runs a listener whose heartbeat is much shorter
// than the quiet between notifications: it pings through the quiet and
// still hears what comes after, and it skips payloads the trigger does not
// write and notifications of its own connections.
func TestListenerHeartbeat(t *testing.T) {
	dsn := newDatabase(t)
	s := openAt(t, dsn)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var feed mapping.Feed
	defer feed.Close()
	own := &pidSet{pids: map[uint32]struct{}{}}
	l, err := listen(t.Context(), cfg, "test.channel", &feed, own, listenTimings{heartbeat: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	heard := &changes{seen: make(chan struct{}, 1)}
	defer feed.Subscribe(func(c mapping.Change) {
		heard.mu.Lock()
		heard.all = append(heard.all, c)
		heard.mu.Unlock()
		select {
		case heard.seen <- struct{}{}:
		default:
		}
	})()

	// Quiet for many heartbeats (a pause, not a measurement).
	time.Sleep(200 * time.Millisecond)

	conn, err := s.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	notify := func(payload string) {
		t.Helper()
		if _, err := conn.Exec(t.Context(), `SELECT pg_notify('test.channel', $1)`, payload); err != nil {
			t.Fatal(err)
		}
	}
	ownConn, err := s.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	own.add(ownConn.Conn().PgConn().PID())
	mine := mapping.KeyOf("mine")
	if _, err := ownConn.Exec(t.Context(), `SELECT pg_notify('test.channel', $1)`, fmt.Sprintf("%x:1", mine[:])); err != nil {
		t.Fatal(err)
	}
	ownConn.Release()

	key := mapping.KeyOf("task-1")
	for _, bad := range []string{"", "nonsense", "zz:1", fmt.Sprintf("%x", key[:]), fmt.Sprintf("%x:x", key[:]), fmt.Sprintf("%x:1", key[:4])} {
		notify(bad)
	}
	notify(fmt.Sprintf("%x:3", key[:]))
	heard.waitUntil(t, "notification after the quiet", func(all []mapping.Change) bool { return len(all) > 0 })
	heard.mu.Lock()
	defer heard.mu.Unlock()
	if want := []mapping.Change{{Key: key, Version: 3}}; len(heard.all) != 1 || heard.all[0] != want[0] {
		t.Errorf("heard %+v, want only %+v", heard.all, want)
	}
}

func TestCloseStopsTheListener(t *testing.T) {
	dsn := newDatabase(t)
	s, err := Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	watcher := openAt(t, dsn)
	pid := s.listener.backendPID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	for {
		var n int
		if err := watcher.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, int32(pid)).Scan(&n); err != nil {
			t.Fatalf("the listener's backend %d still runs after Close: %v", pid, err)
		}
		if n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
