package bridge

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// jsonErrors makes every error answer of h a JSON-RPC error object: an HTTP
// error the SDK writes as text/plain ("session not found", "method not
// allowed", a body it cannot read) is rewritten, keeping its status and
// text. Clients parse every answer of the MCP endpoint as JSON-RPC.
func jsonErrors(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		jw := &jsonErrorWriter{ResponseWriter: w}
		h.ServeHTTP(jw, r)
		jw.flushError()
	})
}

// jsonErrorWriter holds back the body of a text/plain error answer and
// writes it as a JSON-RPC error when the handler is done with it.
type jsonErrorWriter struct {
	http.ResponseWriter
	status  int
	holding bool
	body    bytes.Buffer
}

func (w *jsonErrorWriter) WriteHeader(status int) {
	ct := w.Header().Get("Content-Type")
	if status >= 400 && (ct == "" || strings.HasPrefix(ct, "text/plain")) {
		w.status, w.holding = status, true
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *jsonErrorWriter) Write(p []byte) (int, error) {
	if w.holding {
		if w.body.Len() < 4096 {
			w.body.Write(p)
		}
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// flushError writes the held-back error as JSON.
func (w *jsonErrorWriter) flushError() {
	if !w.holding {
		return
	}
	w.holding = false
	code := jsonrpc.CodeInvalidRequest
	switch {
	case w.status == http.StatusNotFound:
		code = jsonrpc.CodeInvalidRequest // an unknown or expired session
	case w.status >= 500:
		code = jsonrpc.CodeInternalError
	}
	writeJSONError(w.ResponseWriter, w.status, nil, int(code), strings.TrimSpace(w.body.String()))
}

func (w *jsonErrorWriter) Flush() {
	if w.holding {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *jsonErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
