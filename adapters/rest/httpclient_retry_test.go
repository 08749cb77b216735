package rest

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/jarcoal/httpmock"
)

// TestRetriedStartResendsTheBody checks that every try of an idempotent
// start carries the whole rendered body, not only the first.
func TestRetriedStartResendsTheBody(t *testing.T) {
	backend := testBackend()
	backend.IdempotencyHeader = "Idempotency-Key"
	f := newFixture(t, backend, testJob())
	f.on("POST", "/projects/p/jobs",
		jsonResponder(503, `{}`).Then(jsonResponder(502, `{}`)).Then(jsonResponder(201, `{"id":"1"}`)))
	if _, err := f.a.Start(t.Context(), startReq(map[string]any{"project": "p", "count": 2.0})); err != nil {
		t.Fatalf("Start: %v", err)
	}
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("sent %d POSTs, want 3", len(reqs))
	}
	for i, r := range reqs {
		if r.Body == "" || r.Body != reqs[0].Body {
			t.Errorf("POST %d body = %q, want the first one's %q", i, r.Body, reqs[0].Body)
		}
		if !strings.Contains(r.Body, `"count":2`) {
			t.Errorf("POST %d body = %q, want the rendered count", i, r.Body)
		}
	}
}

// TestRetriesEndWithTheLastAnswer checks that a status request that used up
// its retries reports the backend's last answer (its status and message, or
// the connection error), not a generic "giving up" error.
func TestRetriesEndWithTheLastAnswer(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	tests := []struct {
		name      string
		responder httpmock.Responder
		wantText  []string
		wantErr   error // nil: no particular cause
	}{
		{name: "500", responder: jsonResponder(500, `{"message":"db down"}`), wantText: []string{"answered 500", "db down"}},
		{name: "502 then 504", responder: jsonResponder(502, ``).Then(jsonResponder(504, `{"error":"gateway timeout"}`)), wantText: []string{"answered 504", "gateway timeout"}},
		{name: "connection reset", responder: httpmock.NewErrorResponder(reset), wantErr: syscall.ECONNRESET},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backend := testBackend()
			backend.MaxRetries = new(1)
			f := newFixture(t, backend, testJob())
			f.on("GET", "/projects/p/jobs/job-1", tt.responder)
			o, err := f.a.poll(t.Context(), testRef("job-1"), f.a.retries, nil)
			if err != nil || o.Err == nil {
				t.Fatalf("poll = %+v, %v; want an observation error", o, err)
			}
			if strings.Contains(o.Err.Error(), "giving up") {
				t.Errorf("error %q is the library's, want the last answer", o.Err)
			}
			wantText(t, o.Err, tt.wantText...)
			if tt.wantErr != nil && !errors.Is(o.Err, tt.wantErr) {
				t.Errorf("error %v does not wrap %v", o.Err, tt.wantErr)
			}
			if n := len(f.requests()); n != 2 {
				t.Errorf("sent %d requests, want 2 (one retry)", n)
			}
		})
	}
}
