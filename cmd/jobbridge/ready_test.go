package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/internal/pgtest"
)

// outage is a TCP relay between the server and its PostgreSQL: down drops
// every connection and refuses new ones, as a database outage does; up
// listens again on the same address.
type outage struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
}

func newOutage(t *testing.T, target string) *outage {
	o := &outage{addr: "127.0.0.1:0", target: target, conns: map[net.Conn]bool{}}
	o.up(t)
	t.Cleanup(o.down)
	return o
}

func (o *outage) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	o.ln, o.addr = ln, ln.Addr().String()
	o.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", o.target)
			if err != nil {
				c.Close()
				continue
			}
			o.mu.Lock()
			o.conns[c], o.conns[d] = true, true
			o.mu.Unlock()
			go func() { io.Copy(d, c); d.Close() }()
			go func() { io.Copy(c, d); c.Close() }()
		}
	}()
}

func (o *outage) down() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ln != nil {
		o.ln.Close()
	}
	for c := range o.conns {
		c.Close()
	}
	clear(o.conns)
}

func readyz(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// startStoreServer serves the conformance catalog on the store given.
func startStoreServer(t *testing.T, store string) (base string) {
	t.Helper()
	cat, err := loadCatalog("../../configs/conformance.yaml", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	urls := make(chan string, 1)
	done := make(chan error, 1)
	stderr := &syncBuffer{}
	go func() {
		done <- serve(ctx, serveConfig{catalog: cat, listen: "127.0.0.1:0", store: store, logLevel: slog.LevelError + 4,
			ready: func(u string) { urls <- u }}, func(string) (string, bool) { return "", false }, io.Discard, stderr)
	}()
	select {
	case u := <-urls:
		base = strings.TrimSuffix(u, "/mcp")
	case err := <-done:
		t.Fatalf("serve exited: %v\n%s", err, stderr)
	case <-time.After(20 * time.Second):
		t.Fatal("serve never listened")
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v\n%s", err, stderr)
		}
	})
	return base
}

// TestReadyzFollowsThePostgreSQLStore takes the database away from a
// serving process and gives it back: /readyz answers 503 with the reason
// while it is away and 200 once it is back; /healthz stays 200.
func TestReadyzFollowsThePostgreSQLStore(t *testing.T) {
	pg := pgtest.Shared(t)
	dsn := pg.NewDatabase(t)
	relay := newOutage(t, pg.Addr())
	base := startStoreServer(t, strings.Replace(dsn, pg.Addr(), relay.addr, 1))

	if code, body := readyz(t, base); code != http.StatusOK || !strings.HasPrefix(body, "ready: catalog ../../configs/conformance.yaml") {
		t.Fatalf("/readyz = %d %q before the outage, want 200 ready", code, body)
	}
	relay.down()
	code, body := readyz(t, base)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready: the PostgreSQL store does not answer") {
		t.Errorf("/readyz = %d %q during the outage, want 503 with the reason", code, body)
	}
	if strings.Contains(body, "postgres://") {
		t.Errorf("/readyz shows the store URL: %q", body)
	}
	if resp, err := http.Get(base + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz during the outage: %v %v, want 200 (liveness)", err, resp)
	} else {
		resp.Body.Close()
	}
	relay.up(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := readyz(t, base)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %q after the database came back, want 200", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestReadyzOnSQLite(t *testing.T) {
	base := startStoreServer(t, "sqlite:"+filepath.Join(t.TempDir(), "tasks.db"))
	if code, body := readyz(t, base); code != http.StatusOK || !strings.Contains(body, "tools), store answers") {
		t.Errorf("/readyz = %d %q, want 200 ready", code, body)
	}
}
