package batchfake

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
)

// ExchangesEnv is the environment variable naming the directory to which
// fakes record the HTTP exchanges they serve (see [Options.ExchangeDir]).
const ExchangesEnv = "JOBBRIDGE_EXCHANGES"

// requestIDHeader is the header of Batch's request ID, spelled as Batch
// spells it.
const requestIDHeader = "x-amzn-RequestId"

// maxRecordedBody is the size beyond which a recorded body is truncated.
const maxRecordedBody = 1 << 20

// exchange is one recorded HTTP exchange, in the format shared by the fakes
// and the spec checks.
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

// recorder captures the answer written through it. It unwraps to the
// underlying writer, so that a dropped connection can still be hijacked.
type recorder struct {
	http.ResponseWriter
	status   int
	body     bytes.Buffer
	injected bool
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if room := maxRecordedBody + 1 - r.body.Len(); room > 0 {
		r.body.Write(b[:min(len(b), room)])
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// markInjected marks the exchange being recorded through w, if any, as an
// injected fault, whose answer the spec checks do not validate.
func markInjected(w http.ResponseWriter) {
	if r, ok := w.(*recorder); ok {
		r.injected = true
	}
}

// capBody returns a body as text, cut to maxRecordedBody bytes.
func capBody(b []byte) (string, bool) {
	if len(b) > maxRecordedBody {
		return string(b[:maxRecordedBody]), true
	}
	return string(b), false
}

// redactHeaders copies request headers without the ones that carry
// credentials or signatures.
func redactHeaders(h http.Header) http.Header {
	out := h.Clone()
	for _, k := range []string{"Authorization", "X-Amz-Security-Token", "Cookie"} {
		out.Del(k)
	}
	return out
}

// exchangeMu serialises the lines this process appends, so that two
// servers recording to one file never interleave.
var exchangeMu sync.Mutex

// appendExchange appends one exchange as one line, in one write, to
// dir/batch-<pid>.jsonl.
func appendExchange(dir string, ex exchange) error {
	line, err := json.Marshal(ex)
	if err != nil {
		return fmt.Errorf("encoding the exchange: %w", err)
	}
	line = append(line, '\n')
	exchangeMu.Lock()
	defer exchangeMu.Unlock()
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("batch-%d.jsonl", os.Getpid())), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("opening the exchange file: %w", err)
	}
	_, werr := f.Write(line)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("writing the exchange file: %w", werr)
	}
	return nil
}

// newRequestID returns a random, UUID-shaped request ID.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
