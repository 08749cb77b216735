package bridge

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

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
	writeJSONError(w, http.StatusBadRequest, id, mcp.CodeHeaderMismatch, "Header mismatch: "+reason)
}

// writeJSONError answers an HTTP request with a JSON-RPC error object (never
// text/plain: clients parse every answer as JSON-RPC).
func writeJSONError(w http.ResponseWriter, status int, id json.RawMessage, code int, message string) {
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
	resp.Error.Code = code
	resp.Error.Message = message
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(resp)
}
