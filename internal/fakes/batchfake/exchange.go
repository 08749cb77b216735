package batchfake

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net/http"

	"github.com/jobbridge/jobbridge/internal/fakes/exchanges"
)

// ExchangesEnv is the environment variable naming the directory to which
// fakes record the HTTP exchanges they serve (see [Options.ExchangeDir]).
const ExchangesEnv = exchanges.Env

// requestIDHeader is the header of Batch's request ID, spelled as Batch
// spells it.
const requestIDHeader = "x-amzn-RequestId"

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
	if room := exchanges.MaxBody + 1 - r.body.Len(); room > 0 {
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

// newRequestID returns a random, UUID-shaped request ID.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
