package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// TestServeClosesAConnectionWhoseBodyTimedOut is issue 21 item 10: a
// request whose body stalls is answered at the body time-out, and the
// connection is then closed, not held for the (much longer) idle time-out.
func TestServeClosesAConnectionWhoseBodyTimedOut(t *testing.T) {
	lim := defaultHTTPLimits()
	lim.bodyTimeout, lim.idleTimeout = 200*time.Millisecond, time.Minute
	_, addr := startConnTestServer(t, &lim)
	for _, tc := range []struct{ name, auth string }{
		{"authenticated", "Authorization: Bearer " + connTestKey + "\r\n"},
		{"unauthenticated", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			req := "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" + tc.auth +
				"Content-Length: 4096\r\n\r\n{\"jsonrpc\":\"2.0\","
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			// Far shorter than the idle time-out, far longer than the body's.
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to the stalled request: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Errorf("status %d, want an error", resp.StatusCode)
			}
			if _, err := io.Copy(io.Discard, br); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Error("the server kept the connection open after answering the timed-out request")
			}
		})
	}
}
