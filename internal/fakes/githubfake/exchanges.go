package githubfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"
)

// ExchangesEnv names the environment variable that, when it names a
// directory at [New], makes the server append every HTTP exchange it serves
// to $JOBBRIDGE_EXCHANGES/github-<pid>.jsonl, one JSON object a line, so that
// the spec checks can validate the requests and answers against GitHub's
// OpenAPI description. Answers to faults a test injected carry
// "injected": true; bodies over 1 MiB are cut and carry "truncated": true.
// Dropped connections (no answer) and pre-signed log downloads under
// _blobs/ (not part of the REST API) are not recorded.
const ExchangesEnv = "JOBBRIDGE_EXCHANGES"

// maxRecordedBody bounds a body in an exchange record.
const maxRecordedBody = 1 << 20

// exchange is one line of an exchanges file.
type exchange struct {
	Backend         string      `json:"backend"`
	Method          string      `json:"method"`
	Path            string      `json:"path"`
	Query           string      `json:"query"`
	RequestHeaders  http.Header `json:"request_headers"`
	RequestBody     string      `json:"request_body"`
	Status          int         `json:"status"`
	ResponseHeaders http.Header `json:"response_headers"`
	ResponseBody    string      `json:"response_body"`
	Operation       string      `json:"operation,omitempty"`
	Injected        bool        `json:"injected,omitempty"`
	Truncated       bool        `json:"truncated,omitempty"`
}

// recordMu serialises the appends of every server in the process.
var recordMu sync.Mutex

// record appends the exchange to the exchanges file, when recording is on.
// A failure to record is reported on stderr and does not fail the request.
func (s *Server) record(r *http.Request, reqBody []byte, resp response, injected bool) {
	if s.exchangeDir == "" || strings.HasPrefix(r.URL.Path, "/_blobs/") {
		return
	}
	e := exchange{
		Backend: "github", Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		RequestHeaders: redactHeaders(r.Header), Status: resp.status,
		ResponseHeaders: resp.header.Clone(), Injected: injected,
	}
	var cut bool
	e.RequestBody, cut = capBody(reqBody)
	e.Truncated = e.Truncated || cut
	respBody := resp.data
	if resp.body == nil {
		respBody = []byte(resp.text)
	}
	if resp.status == http.StatusNotModified || resp.status == http.StatusNoContent || resp.status == http.StatusFound {
		respBody = nil
	}
	e.ResponseBody, cut = capBody(respBody)
	e.Truncated = e.Truncated || cut
	line, err := json.Marshal(e)
	if err != nil {
		fmt.Fprintf(os.Stderr, "githubfake: recording an exchange: %v\n", err)
		return
	}
	line = append(line, '\n')
	recordMu.Lock()
	defer recordMu.Unlock()
	name := filepath.Join(s.exchangeDir, fmt.Sprintf("github-%d.jsonl", os.Getpid()))
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "githubfake: recording an exchange: %v\n", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(line); err != nil { // one write per line
		fmt.Fprintf(os.Stderr, "githubfake: recording an exchange: %v\n", err)
	}
}

// capBody returns b as a string, cut at maxRecordedBody bytes (on a rune
// boundary).
func capBody(b []byte) (string, bool) {
	if len(b) <= maxRecordedBody {
		return string(b), false
	}
	cut := maxRecordedBody
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]), true
}

// redactHeaders copies h without credentials: the exchanges file may be
// kept as a CI artifact.
func redactHeaders(h http.Header) http.Header {
	out := h.Clone()
	if out == nil {
		return http.Header{}
	}
	if v := out.Get("Authorization"); v != "" {
		scheme, _, _ := strings.Cut(v, " ")
		out.Set("Authorization", scheme+" [redacted]")
	}
	return out
}
