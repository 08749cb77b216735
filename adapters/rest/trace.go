package rest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// Event is one step of the adapter's work, reported to [Options.Trace]: a
// request sent, an answer received, or how a rule read an answer. Its text
// is for people; secrets are redacted from it.
type Event struct {
	// Call is the block the step belongs to: start, status, cancel,
	// respond, find, job_id.queue or job_id.queue.cancel.
	Call string
	// Kind is "request", "answer" or "rule".
	Kind string
	// Text describes the step, possibly on several lines.
	Text string
}

// maxTraced bounds a body shown in a trace.
const maxTraced = 2000

func (a *Adapter) traceText(c *call, kind, text string) {
	if a.trace == nil || c == nil {
		return
	}
	a.trace(Event{Call: c.name, Kind: kind, Text: text})
}

// traceRequest reports a request: its method, URL, headers (values that
// hold secrets redacted) and body.
func (a *Adapter) traceRequest(c *call, req *http.Request) {
	if a.trace == nil {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", req.Method, a.redactor.Redact(req.URL.String()))
	// Sign a copy so that the headers shown are the ones sent.
	shown := req.Clone(req.Context())
	if sign := signer(shown.Context()); sign != nil {
		_ = sign(shown)
	}
	writeHeaders(&b, shown.Header, a.redactor.Redact)
	if req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			body, _ := io.ReadAll(io.LimitReader(rc, maxTraced+1))
			rc.Close()
			b.WriteString("\n\n" + a.redactor.Clean(string(body), maxTraced))
		}
	}
	a.traceText(c, "request", b.String())
}

// traceAnswer reports an answer: its status, headers and body.
func (a *Adapter) traceAnswer(c *call, resp *http.Response, body []byte) {
	if a.trace == nil {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d", resp.StatusCode)
	writeHeaders(&b, resp.Header, a.redactor.Redact)
	if len(body) > 0 {
		b.WriteString("\n\n" + a.redactor.Redact(string(bytes.ToValidUTF8(truncate(body, maxTraced), []byte("?")))))
	}
	a.traceText(c, "answer", b.String())
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return append(b[:n:n], "…"...)
	}
	return b
}

func writeHeaders(b *strings.Builder, h http.Header, redact func(string) string) {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range h[k] {
			fmt.Fprintf(b, "\n%s: %s", k, redact(v))
		}
	}
}
