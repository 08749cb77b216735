package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/auth"
	"github.com/jobbridge/jobbridge/internal/connlimit"
	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
	"github.com/jobbridge/jobbridge/taskclient"
)

// connTestKey is the API key of the legitimate client in these tests.
const connTestKey = "jbk_conn-test-key-0123456789abcdefghijklmnopqrstuvwxyz"

// startConnTestServer serves the conformance catalog, against the REST job
// API fake, with API-key authentication (so that unauthenticated clients
// get 401) and the given HTTP limits (nil: the defaults). It returns the
// endpoint URL and the host:port.
func startConnTestServer(t *testing.T, lim *httpLimits) (url, addr string) {
	t.Helper()
	fake := jobapi.New(nil)
	fakeURL, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	cat, err := loadCatalog(writeReplicaCatalog(t, fakeURL), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cat.Auth = &auth.Config{APIKeys: &auth.APIKeysConfig{Keys: []auth.APIKey{{Name: "legit", SHA256: auth.HashAPIKey(connTestKey)}}}}
	cat.Auth.SetDefaults()

	ctx, cancel := context.WithCancel(t.Context())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	stderr := &syncBuffer{}
	go func() {
		done <- serve(ctx, serveConfig{
			catalog:  cat,
			listen:   "127.0.0.1:0",
			store:    "sqlite:" + filepath.Join(t.TempDir(), "tasks.db"),
			logLevel: slog.LevelError + 4, // quiet
			http:     lim,
			ready:    func(u string) { urls <- u },
		}, func(string) (string, bool) { return "", false }, io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v\n%s", err, stderr)
		}
	})
	select {
	case url = <-urls:
	case err := <-done:
		t.Fatalf("serve exited: %v\n%s", err, stderr)
	case <-time.After(20 * time.Second):
		t.Fatal("serve never listened")
	}
	addr = strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	return url, addr
}

// Slow connections, as the fault campaign made them (no credentials).
const (
	// stalledBody sends its headers and the start of a body, then stalls.
	stalledBody = "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 4096\r\n\r\n{\"jsonrpc\":\"2.0\","
	// stalledHeaders sends part of its headers, then stalls.
	stalledHeaders = "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: appl"
	// unauthenticated is a whole request that gets a 401; the connection
	// then stays idle.
	unauthenticated = "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Method: server/discover\r\nContent-Length: 52\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\"}\n"
	// healthz is a whole request that succeeds; the connection then stays
	// idle.
	healthz = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
)

// TestServeAnswersDespiteSlowConnections is the measurement of issue 10
// item 1: with 2,000 slow connections open from the legitimate client's own
// address (half stalled in their request body, half idle after a 401), a
// legitimate tasks/get on a new connection is answered within 1s, five
// times out of five, and the server holds no more connections than its
// cap. Run it with -v to see the latencies.
func TestServeAnswersDespiteSlowConnections(t *testing.T) {
	const slow = 2000
	if n, ok := connlimit.OpenFileLimit(); ok && n < 2*slow+1024 {
		t.Fatalf("the open-file limit is %d; this test needs %d (ulimit -n)", n, 2*slow+1024)
	}
	defaults := defaultHTTPLimits()
	totalOnly := defaultHTTPLimits()
	totalOnly.maxConnsPerIP, totalOnly.maxConns = 0, 256
	for _, tc := range []struct {
		name string
		lim  httpLimits
		cap  int // connections the server may hold
	}{
		{"defaults (per-address cap)", defaults, defaults.maxConnsPerIP},
		{"total cap only", totalOnly, totalOnly.maxConns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, addr := startConnTestServer(t, &tc.lim)
			checkServedDespiteSlowConns(t, url, addr, slow, tc.cap)
		})
	}
}

// TestServeBinaryAnswersDespiteSlowConnections is the same measurement
// against the real binary, run with `ulimit -n 1024` as the fault campaign
// ran it: without the limits the server runs out of file descriptors
// (accept4: too many open files) and the legitimate client is starved.
func TestServeBinaryAnswersDespiteSlowConnections(t *testing.T) {
	const slow, fileLimit = 2000, 1024
	if n, ok := connlimit.OpenFileLimit(); ok && n < slow+1024 {
		t.Fatalf("the open-file limit is %d; this test needs %d (ulimit -n)", n, slow+1024)
	}
	bin := buildBinary(t)
	fake := jobapi.New(nil)
	fakeURL, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	catalogPath := writeReplicaCatalog(t, fakeURL)
	data, err := os.ReadFile(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	data = fmt.Appendf(data, "\nauth:\n  api_keys:\n    keys:\n      - {name: legit, sha256: %s}\n", auth.HashAPIKey(connTestKey))
	if err := os.WriteFile(catalogPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	log := &syncBuffer{}
	cmd := exec.Command("sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, fileLimit), bin, "serve",
		"--config", catalogPath, "--store", "sqlite:"+filepath.Join(t.TempDir(), "tasks.db"), "--listen", addr, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("jobbridge serve exited: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobbridge serve never became ready: %s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// --max-conns is lowered to fit the file limit; the per-address cap
	// (512) is the lower one.
	checkServedDespiteSlowConns(t, "http://"+addr+"/mcp", addr, slow, defaultMaxConnsPerIP)
	if strings.Contains(log.String(), "too many open files") {
		t.Errorf("the server ran out of file descriptors:\n%s", log)
	}
}

// checkServedDespiteSlowConns opens slow connections to the server at
// addr, half stalled in their body and half idle after a 401, then checks
// that five tasks/get, each on a new connection, are answered within 1s, and
// that the server holds at most cap of the slow connections.
func checkServedDespiteSlowConns(t *testing.T, url, addr string, slow, cap int) {
	t.Helper()
	ctx := t.Context()
	legit := &taskclient.Client{
		URL:    url,
		Tasks:  true,
		Header: http.Header{"Authorization": {"Bearer " + connTestKey}},
		// A new connection for every request: each must get in past the
		// slow ones.
		HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	}
	res, err := legit.CallTool(ctx, "slow_compute", map[string]any{"seconds": 60, "label": "legit"}, nil)
	if err != nil || res.Task == nil {
		t.Fatalf("tools/call: %v %+v", err, res)
	}

	conns := openSlowConns(t, addr, slow, []string{stalledBody, unauthenticated})
	var latencies []time.Duration
	for i := range 5 {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		start := time.Now()
		task, err := legit.GetTask(rctx, res.Task.TaskID)
		elapsed := time.Since(start)
		cancel()
		latencies = append(latencies, elapsed)
		if err != nil {
			t.Errorf("tasks/get %d: %v after %s", i, err, elapsed)
			continue
		}
		if task.Status != "working" {
			t.Errorf("tasks/get %d: status %s, want working", i, task.Status)
		}
		// The user-facing requirement, not a benchmark.
		if elapsed > time.Second {
			t.Errorf("tasks/get %d answered in %s, want within 1s", i, elapsed)
		}
	}
	held := countOpen(conns)
	t.Logf("%d slow connections: tasks/get latencies %v; the server still holds %d of them (cap %d)", slow, latencies, held, cap)
	if held > cap {
		t.Errorf("the server holds %d slow connections, more than its cap of %d", held, cap)
	}
}

// TestServeClosesSlowAndIdleConnections: a connection stalled in its
// headers or its body is closed after the read timeouts, one idle after a
// request (also after a 401) after the idle timeout.
func TestServeClosesSlowAndIdleConnections(t *testing.T) {
	lim := defaultHTTPLimits()
	lim.readHeaderTimeout, lim.bodyTimeout, lim.idleTimeout = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
	_, addr := startConnTestServer(t, &lim)
	for _, tc := range []struct {
		name, request string
		status        int // the answer before the close; 0: none
	}{
		{"stalled in its headers", stalledHeaders, 0},
		{"stalled in its body", stalledBody, 0},
		{"idle after a response", healthz, http.StatusOK},
		{"idle after a 401", unauthenticated, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.request); err != nil {
				t.Fatal(err)
			}
			// Far longer than the timeouts; without them the connection
			// is held until the client closes it.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c)
			if tc.status != 0 {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("reading the answer: %v", err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.status {
					t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
				}
			}
			if _, err := io.Copy(io.Discard, br); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Error("the server kept the connection open")
			}
		})
	}
}

// TestServeSyncCallOutlivesReadTimeouts: a synchronous tools/call that waits
// for its job longer than the read and idle timeouts is still answered: the
// timeouts bound clients, not the server's own work.
func TestServeSyncCallOutlivesReadTimeouts(t *testing.T) {
	lim := defaultHTTPLimits()
	lim.readHeaderTimeout, lim.bodyTimeout, lim.idleTimeout = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
	url, _ := startConnTestServer(t, &lim)
	c := &taskclient.Client{URL: url, Header: http.Header{"Authorization": {"Bearer " + connTestKey}}}
	res, err := c.CallTool(t.Context(), "slow_compute", map[string]any{"seconds": 1, "label": "sync"}, nil)
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if res.Task != nil || res.Result == nil || !strings.Contains(res.Result.Text(), "Computed sync") {
		t.Errorf("got %+v, want the job's result", res)
	}
}

func TestHTTPLimitFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want httpLimits
	}{
		{nil, httpLimits{readHeaderTimeout: 10 * time.Second, bodyTimeout: 30 * time.Second, idleTimeout: 120 * time.Second, maxConns: 4096, maxConnsPerIP: 512}},
		{[]string{"--read-header-timeout", "5s", "--read-timeout", "1m", "--idle-timeout", "0", "--write-timeout", "10m", "--max-conns", "100", "--max-conns-per-ip", "0"},
			httpLimits{readHeaderTimeout: 5 * time.Second, bodyTimeout: time.Minute, writeTimeout: 10 * time.Minute, maxConns: 100}},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		got := httpLimitFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if *got != tc.want {
			t.Errorf("%q: got %+v, want %+v", tc.args, *got, tc.want)
		}
	}
}

func TestWriteTimeoutCoversTheLongestSyncCall(t *testing.T) {
	cat, err := loadCatalog("../../configs/conformance.yaml", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	longest := time.Duration(0)
	for _, tl := range cat.Tools {
		longest = max(longest, tl.SyncBudget)
	}
	cat.Tools[len(cat.Tools)-1].SyncBudget = longest + 7*time.Minute
	if got, want := writeTimeoutFor(cat, 20*time.Second), 20*time.Second+longest+7*time.Minute+writeMargin; got != want {
		t.Errorf("write timeout %s, want %s", got, want)
	}
}

func TestLongLivedStreams(t *testing.T) {
	for _, tc := range []struct {
		method string
		header http.Header
		want   bool
	}{
		{"GET", http.Header{"Accept": {"text/event-stream"}}, true},
		{"GET", http.Header{"Accept": {"application/json, Text/Event-Stream;q=0.9"}}, true},
		{"GET", http.Header{"Accept": {"application/json"}}, false},
		{"POST", http.Header{"Mcp-Method": {"subscriptions/listen"}, "Accept": {"application/json, text/event-stream"}}, true},
		{"POST", http.Header{"Mcp-Method": {"tools/call"}, "Accept": {"application/json, text/event-stream"}}, false},
	} {
		r, _ := http.NewRequest(tc.method, "http://x/mcp", nil)
		r.Header = tc.header
		if got := longLivedStream(r); got != tc.want {
			t.Errorf("%s %v: long-lived %v, want %v", tc.method, tc.header, got, tc.want)
		}
	}
}

// openSlowConns opens n connections to addr, cycling through the requests
// (each written at once, never finished or followed by another). Like the
// clients of the fault campaign, a connection whose request is whole reads
// its answer before it idles.
func openSlowConns(t *testing.T, addr string, n int, requests []string) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	sem := make(chan struct{}, 32)
	answersBy := time.Now().Add(10 * time.Second)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			req := requests[i%len(requests)]
			if err == nil {
				_, err = io.WriteString(c, req)
			}
			if err == nil && req != stalledBody && req != stalledHeaders {
				// The server may shed the connection instead of
				// answering, or (without limits) never get to it:
				// neither is a failure here.
				c.SetReadDeadline(answersBy)
				if resp, rerr := http.ReadResponse(bufio.NewReader(c), nil); rerr == nil {
					resp.Body.Close()
				}
				c.SetReadDeadline(time.Time{})
			}
			if err != nil {
				// A connection the server already shed may fail its
				// write; that is the point, not a failure.
				if c == nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				return
			}
			conns[i] = c
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	if len(errs) > 0 {
		t.Fatalf("%d of %d slow connections could not be opened: %v", len(errs), n, errs[0])
	}
	return slices.DeleteFunc(conns, func(c net.Conn) bool { return c == nil })
}

// countOpen counts the connections the server holds: reading them (past
// any answer) ends in a timeout, twice, rather than an EOF or a reset. A
// connection answered 503 is being refused and does not count.
func countOpen(conns []net.Conn) int {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		open int
	)
	held := func(c net.Conn) bool {
		var got strings.Builder
		for range 2 { // a second look, in case this goroutine was descheduled past the deadline
			// The deadline starts when this read does: an expired one
			// fails the read before it looks at the socket.
			c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			_, err := io.Copy(&got, c)
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				return false
			}
		}
		return !strings.HasPrefix(got.String(), "HTTP/1.1 503")
	}
	work := make(chan net.Conn)
	for range 64 {
		wg.Go(func() {
			for c := range work {
				if held(c) {
					mu.Lock()
					open++
					mu.Unlock()
				}
			}
		})
	}
	for _, c := range conns {
		work <- c
	}
	close(work)
	wg.Wait()
	return open
}
