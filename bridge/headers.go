package bridge

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxBody bounds the request body the header check reads; the SDK applies
// the same default limit afterwards.
const maxBody = mcp.DefaultMaxRequestBodyBytes

// checkTaskHeaders enforces, for tasks/get, tasks/update and tasks/cancel over
// HTTP, that the Mcp-Name header equals params.taskId (the Tasks extension's
// routing header). A missing or different header is answered with HTTP 400 and
// JSON-RPC -32020 (HeaderMismatch). Other requests pass through untouched; the
// SDK checks the headers of standard methods itself.
func checkTaskHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil || int64(len(body)) > maxBody {
			next.ServeHTTP(w, r) // let the SDK report the oversized or broken body
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				TaskID *string `json:"taskId"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) != nil {
			next.ServeHTTP(w, r)
			return
		}
		switch msg.Method {
		case "tasks/get", "tasks/update", "tasks/cancel":
		default:
			next.ServeHTTP(w, r)
			return
		}
		if msg.Params.TaskID == nil {
			next.ServeHTTP(w, r) // malformed params: the handler answers -32602
			return
		}
		name, ok := headerValue(r.Header, "Mcp-Name")
		if !ok || name != *msg.Params.TaskID {
			reason := "Mcp-Name header does not match params.taskId"
			if !ok {
				reason = "Mcp-Name header is required on " + msg.Method
			}
			writeHeaderMismatch(w, msg.ID, reason)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// headerValue returns a header's value with surrounding whitespace removed
// and the =?base64?...?= encoding of non-ASCII values decoded.
func headerValue(h http.Header, key string) (string, bool) {
	vals, ok := h[http.CanonicalHeaderKey(key)]
	if !ok || len(vals) == 0 {
		return "", false
	}
	v := strings.TrimSpace(vals[0])
	if strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?=") {
		dec, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(strings.TrimPrefix(v, "=?base64?"), "?="))
		if err != nil {
			return "", false
		}
		v = string(dec)
	}
	return v, true
}

func writeHeaderMismatch(w http.ResponseWriter, id json.RawMessage, reason string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id}
	resp.Error.Code = mcp.CodeHeaderMismatch
	resp.Error.Message = "Header mismatch: " + reason
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(resp)
}
