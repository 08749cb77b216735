// Package exchanges records the HTTP exchanges a fake backend serves, one
// JSON object a line, so that the spec checks (specs/check.mjs, run by
// `make spec-check`) can validate every request and answer against the
// backend's official description (GitHub's OpenAPI, the AWS Batch model).
//
// A fake records when the environment variable [Env] names a directory; each
// process appends to <dir>/<backend>-<pid>.jsonl.
package exchanges

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

// Env names the environment variable that, when it names a directory, makes
// the fakes record their exchanges there.
const Env = "JOBBRIDGE_EXCHANGES"

// MaxBody is the size beyond which a recorded body is cut (and the record
// marked Truncated).
const MaxBody = 1 << 20

// Exchange is one recorded HTTP exchange, in the format the spec checks
// read.
type Exchange struct {
	Backend         string      `json:"backend"`
	Method          string      `json:"method"`
	Path            string      `json:"path"`
	Query           string      `json:"query"`
	RequestHeaders  http.Header `json:"request_headers"`
	RequestBody     string      `json:"request_body"`
	Status          int         `json:"status"`
	ResponseHeaders http.Header `json:"response_headers"`
	ResponseBody    string      `json:"response_body"`
	// Operation names the backend operation, where the path alone does not
	// (Batch: DescribeJobs).
	Operation string `json:"operation,omitempty"`
	// Injected marks the answer to a fault a test injected on purpose: the
	// checks validate its request, not its answer.
	Injected bool `json:"injected,omitempty"`
	// Truncated marks a record whose body was cut at MaxBody.
	Truncated bool `json:"truncated,omitempty"`
}

// Body returns b as text, cut at MaxBody bytes on a character boundary, and
// whether it was cut.
func Body(b []byte) (string, bool) {
	if len(b) <= MaxBody {
		return string(b), false
	}
	cut := MaxBody
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]), true
}

// Redaction says what a record keeps of a request's Authorization header.
type Redaction int

const (
	// DropAuthorization leaves the Authorization header out of the record
	// (Batch: a SigV4 signature, whose scheme the checks do not need).
	DropAuthorization Redaction = iota
	// KeepScheme keeps the header's scheme and replaces its credentials with
	// "[redacted]" (GitHub: "Bearer [redacted]"), so that the record still
	// shows how the request authenticated.
	KeepScheme
)

// RedactHeaders returns a copy of request headers h fit to record: the
// records may be kept as CI artifacts, so Cookie and X-Amz-Security-Token
// are left out and Authorization is treated as how says. It never returns
// nil.
func RedactHeaders(h http.Header, how Redaction) http.Header {
	out := h.Clone()
	if out == nil {
		return http.Header{}
	}
	out.Del("Cookie")
	out.Del("X-Amz-Security-Token")
	if v := out.Get("Authorization"); v != "" {
		switch how {
		case KeepScheme:
			scheme, _, _ := strings.Cut(v, " ")
			out.Set("Authorization", scheme+" [redacted]")
		default:
			out.Del("Authorization")
		}
	}
	return out
}

// mu serialises the lines this process appends, so that two servers
// recording to one file never interleave.
var mu sync.Mutex

// Append appends x as one line, in one write, to dir/<x.Backend>-<pid>.jsonl.
func Append(dir string, x Exchange) error {
	line, err := json.Marshal(x)
	if err != nil {
		return fmt.Errorf("encoding the exchange: %w", err)
	}
	line = append(line, '\n')
	mu.Lock()
	defer mu.Unlock()
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s-%d.jsonl", x.Backend, os.Getpid())), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
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
