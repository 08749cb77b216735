// Package taskclient is a small MCP client for the 2026-07-28 revision of the
// protocol and its Tasks extension (io.modelcontextprotocol/tasks), speaking
// raw JSON-RPC over stateless Streamable HTTP.
//
// It exists because the go-sdk client cannot see task handles: it decodes a
// CreateTaskResult into a CallToolResult and drops the taskId. taskclient keeps
// every result kind distinct ([CallResult]) and adds the three task methods
// ([Client.GetTask], [Client.UpdateTask], [Client.CancelTask]), the push
// stream of task notifications ([Client.Listen]), a polling helper ([Wait])
// and [Follow], which follows a task on its stream and polls when the server
// does not stream. It is used by the `jobbridge call` command and by Go tests
// of the bridge; [Client.Raw] gives tests the exact bytes and headers.
//
// Every request is a POST carrying the MCP-Protocol-Version, Mcp-Method and
// (where the method has one) Mcp-Name headers, and per-request _meta with the
// protocol version, client info and client capabilities. Responses may be a
// single JSON object or a text/event-stream; notifications on a stream are
// ignored. JSON-RPC errors are returned as *[RPCError], and an HTTP error
// answer without a JSON-RPC body (a proxy's 502) as *[HTTPError].
package taskclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
)

// Protocol constants used on the wire.
const (
	// ProtocolVersion is the MCP revision this client speaks.
	ProtocolVersion = "2026-07-28"
	// TasksExtension is the identifier of the Tasks extension.
	TasksExtension = "io.modelcontextprotocol/tasks"

	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
)

// Standard JSON-RPC and MCP error codes a caller may want to test for.
const (
	CodeParseError                      = -32700
	CodeInvalidRequest                  = -32600
	CodeMethodNotFound                  = -32601
	CodeInvalidParams                   = -32602
	CodeInternalError                   = -32603
	CodeHeaderMismatch                  = -32020
	CodeMissingRequiredClientCapability = -32021
	CodeUnsupportedProtocolVersion      = -32022
)

// maxResponseBytes bounds how much of a response body is read.
const maxResponseBytes = 32 << 20

// Client sends MCP requests to one Streamable HTTP endpoint. The zero value is
// not usable: URL must be set. A Client is safe for concurrent use once its
// fields are set; it must not be copied after first use.
type Client struct {
	// URL is the MCP endpoint, for example http://127.0.0.1:8080/mcp.
	URL string
	// HTTPClient sends the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Tasks declares the Tasks extension in every request's client
	// capabilities; Elicitation declares form elicitation.
	Tasks, Elicitation bool
	// Header holds extra headers sent with every request, such as
	// Authorization. The protocol headers are set by the client and cannot be
	// overridden here (use the header argument of Raw for that).
	Header http.Header
	// ClientName and ClientVersion are sent as clientInfo; they default to
	// "taskclient" and "0".
	ClientName, ClientVersion string

	lastID atomic.Int64
}

// RPCError is a JSON-RPC error returned by the server, either as the response
// to a request or inlined in a failed task.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
	// HTTPStatus is the status of the HTTP response that carried the error;
	// zero for an error inlined in a task.
	HTTPStatus int `json:"-"`
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message)
}

// HTTPError is an HTTP response that carried no JSON-RPC message, such as a
// 502 from a proxy in front of a server that is down.
type HTTPError struct {
	StatusCode int
	// Body is the start of the response body.
	Body string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("unexpected HTTP status %d: %s", e.StatusCode, e.Body)
}

// Capabilities returns the client capabilities this client declares, as sent
// in _meta.
func (c *Client) Capabilities() map[string]any {
	caps := map[string]any{}
	if c.Tasks {
		caps["extensions"] = map[string]any{TasksExtension: map[string]any{}}
	}
	if c.Elicitation {
		caps["elicitation"] = map[string]any{}
	}
	return caps
}

func (c *Client) meta() map[string]any {
	name, version := c.ClientName, c.ClientVersion
	if name == "" {
		name = "taskclient"
	}
	if version == "" {
		version = "0"
	}
	return map[string]any{
		metaProtocolVersion:    ProtocolVersion,
		metaClientInfo:         map[string]string{"name": name, "version": version},
		metaClientCapabilities: c.Capabilities(),
	}
}

// Raw sends one request and returns the raw result of the response with the
// given method, together with the HTTP response (its body already read and
// closed). It is the building block of the other methods and serves tests that
// need exact bytes.
//
// params must marshal to a JSON object (nil means {}). The client's standard
// _meta entries are added; entries in params' own "_meta" object take
// precedence, and a null entry there removes the standard one. The protocol
// headers are set from method and params; header then overrides them key by
// key, and a key whose values are all empty strings removes that header.
//
// A JSON-RPC error is returned as *RPCError. The *http.Response is returned
// whenever one was received, including with an error.
func (c *Client) Raw(ctx context.Context, method string, params any, header http.Header) (json.RawMessage, *http.Response, error) {
	req, id, err := c.newRequest(ctx, method, params, header)
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("sending %s request: %w", method, err)
	}
	defer resp.Body.Close()
	result, err := readResponse(resp, id)
	if err != nil {
		return nil, resp, fmt.Errorf("%s: %w", method, err)
	}
	return result, resp, nil
}

func (c *Client) httpClient() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return http.DefaultClient
}

// newRequest builds the HTTP request of one JSON-RPC request, as Raw
// describes, and returns it with the request's id.
func (c *Client) newRequest(ctx context.Context, method string, params any, header http.Header) (*http.Request, string, error) {
	body, name, err := c.encodeRequest(method, params)
	if err != nil {
		return nil, "", err
	}
	id := c.lastID.Add(1)
	msg := map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": body}
	data, err := json.Marshal(msg)
	if err != nil {
		return nil, "", fmt.Errorf("encoding %s request: %w", method, err)
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("building %s request: %w", method, err)
	}
	for k, vs := range c.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", ProtocolVersion)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", encodeHeaderValue(name))
	}
	for k, vs := range header {
		if allEmpty(vs) {
			req.Header.Del(k)
			continue
		}
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	return req, strconv.FormatInt(id, 10), nil
}

// encodeRequest builds the params object with _meta merged in, and returns the
// value of the Mcp-Name header the method calls for ("" for none).
func (c *Client) encodeRequest(method string, params any) (map[string]json.RawMessage, string, error) {
	obj := map[string]json.RawMessage{}
	if params != nil {
		data, err := json.Marshal(params)
		if err != nil {
			return nil, "", fmt.Errorf("encoding %s params: %w", method, err)
		}
		if string(data) != "null" {
			if err := json.Unmarshal(data, &obj); err != nil {
				return nil, "", fmt.Errorf("encoding %s params: not a JSON object: %w", method, err)
			}
		}
	}

	meta := map[string]json.RawMessage{}
	for k, v := range c.meta() {
		data, err := json.Marshal(v)
		if err != nil {
			return nil, "", fmt.Errorf("encoding %s _meta: %w", method, err)
		}
		meta[k] = data
	}
	if own, ok := obj["_meta"]; ok && string(own) != "null" {
		var extra map[string]json.RawMessage
		if err := json.Unmarshal(own, &extra); err != nil {
			return nil, "", fmt.Errorf("encoding %s _meta: not a JSON object: %w", method, err)
		}
		for k, v := range extra {
			if string(v) == "null" {
				delete(meta, k)
				continue
			}
			meta[k] = v
		}
	}
	metaData, err := json.Marshal(meta)
	if err != nil {
		return nil, "", fmt.Errorf("encoding %s _meta: %w", method, err)
	}
	obj["_meta"] = metaData

	var nameField string
	switch method {
	case "tools/call", "prompts/get":
		nameField = "name"
	case "resources/read":
		nameField = "uri"
	case "tasks/get", "tasks/update", "tasks/cancel":
		nameField = "taskId"
	}
	var name string
	if raw, ok := obj[nameField]; ok && nameField != "" {
		_ = json.Unmarshal(raw, &name) // a non-string leaves the header out
	}
	return obj, name, nil
}

// rpcMessage is any JSON-RPC message a server may send on a response.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
}

// readResponse finds the response to the request with the given id in resp,
// which may be a JSON object or an event stream.
func readResponse(resp *http.Response, id string) (json.RawMessage, error) {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var (
		msg *rpcMessage
		err error
	)
	switch {
	case ct == "text/event-stream" && resp.StatusCode < 300:
		msg, err = readEventStream(io.LimitReader(resp.Body, maxResponseBytes), id)
	default:
		msg, err = readJSONBody(resp, id)
	}
	if err != nil {
		return nil, err
	}
	if msg.Error != nil {
		msg.Error.HTTPStatus = resp.StatusCode
		return nil, msg.Error
	}
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("unexpected HTTP status %d with a result", resp.StatusCode)
	}
	if msg.Result == nil {
		return nil, errors.New("response has neither result nor error")
	}
	return msg.Result, nil
}

func readJSONBody(resp *http.Response, id string) (*rpcMessage, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("reading response body: %w", err)
	}
	var msg rpcMessage
	if err := json.Unmarshal(body, &msg); err != nil || (msg.Result == nil && msg.Error == nil) {
		if resp.StatusCode >= 300 {
			return nil, &HTTPError{StatusCode: resp.StatusCode, Body: snippet(body)}
		}
		if err != nil {
			return nil, fmt.Errorf("decoding response: %w", err)
		}
		return nil, fmt.Errorf("decoding response: not a JSON-RPC response: %s", snippet(body))
	}
	if !sameID(msg.ID, id) && !(msg.Error != nil && isNullID(msg.ID)) {
		return nil, fmt.Errorf("response id %s does not match request id %s", msg.ID, id)
	}
	return &msg, nil
}

// readEventStream reads server-sent events until the message answering id.
func readEventStream(r io.Reader, id string) (*rpcMessage, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxResponseBytes)
	var data []string
	dispatch := func() (*rpcMessage, bool) {
		if len(data) == 0 {
			return nil, false
		}
		payload := strings.Join(data, "\n")
		data = data[:0]
		var msg rpcMessage
		if err := json.Unmarshal([]byte(payload), &msg); err != nil {
			return nil, false // not a JSON-RPC message; ignore it
		}
		if msg.Method != "" || (msg.Result == nil && msg.Error == nil) {
			return nil, false // a notification (or a request, which servers must not send)
		}
		if !sameID(msg.ID, id) {
			return nil, false
		}
		return &msg, true
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if msg, ok := dispatch(); ok {
				return msg, nil
			}
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		if field == "data" {
			data = append(data, value)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading event stream: %w", err)
	}
	if msg, ok := dispatch(); ok {
		return msg, nil
	}
	return nil, errors.New("event stream ended without a response")
}

func sameID(raw json.RawMessage, id string) bool {
	return string(bytes.TrimSpace(raw)) == id
}

func isNullID(raw json.RawMessage) bool {
	s := string(bytes.TrimSpace(raw))
	return s == "" || s == "null"
}

func snippet(b []byte) string {
	const max = 200
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

func allEmpty(vs []string) bool {
	for _, v := range vs {
		if v != "" {
			return false
		}
	}
	return true
}

// encodeHeaderValue applies the =?base64?…?= wrapping that Streamable HTTP
// requires for header values that are not plain printable ASCII.
func encodeHeaderValue(s string) string {
	const prefix, suffix = "=?base64?", "?="
	needs := strings.HasPrefix(s, prefix) && strings.HasSuffix(s, suffix)
	if s != "" && (s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		needs = true
	}
	for i := 0; i < len(s) && !needs; i++ {
		needs = s[i] < 0x20 || s[i] > 0x7e
	}
	if !needs {
		return s
	}
	return prefix + base64.StdEncoding.EncodeToString([]byte(s)) + suffix
}
