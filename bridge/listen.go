package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jobbridge/jobbridge/auth"
)

// subscriptions/listen with params.notifications.taskIds (the Tasks
// extension's addition to the core method). The SDK serves listen for the
// core's list-changed notifications only, and drops the field it does not
// know, so the transports hand a listen that names tasks to the bridge
// before the SDK sees it: over Streamable HTTP a long-lived SSE response,
// over stdio messages interleaved with the session's others.

// listenRequest is a subscriptions/listen that lists task IDs.
type listenRequest struct {
	// id is the request's JSON-RPC id, the subscription's identity.
	id json.RawMessage
	// ids are the task IDs asked for.
	ids []string
	// declared is whether the request's _meta declares the tasks extension.
	declared bool
}

// parseListen reads a subscriptions/listen's params. ok is false when they
// do not name tasks (the SDK serves the request then). A taskIds that is
// not a list of strings is a malformed request (err).
func parseListen(id json.RawMessage, params json.RawMessage) (req listenRequest, ok bool, err error) {
	var p struct {
		Meta          map[string]any             `json:"_meta"`
		Notifications map[string]json.RawMessage `json:"notifications"`
	}
	if json.Unmarshal(params, &p) != nil {
		return req, false, nil // the SDK reports malformed params
	}
	raw, named := p.Notifications["taskIds"]
	if !named {
		return req, false, nil
	}
	req.id = id
	if err := json.Unmarshal(raw, &req.ids); err != nil {
		return req, true, invalidParams("notifications.taskIds must be a list of task ID strings")
	}
	req.declared = requestDeclaresTasks(p.Meta)
	return req, true, nil
}

// listenSink is where a stream's messages go.
type listenSink interface {
	// send writes one notification.
	send(method string, params json.RawMessage) error
	// idle is called when nothing was sent for the keep-alive period.
	idle() error
	// end closes the subscription gracefully, from the server's side.
	end() error
}

// startListen checks a listen request and registers its stream. The
// error, if any, is the JSON-RPC error to answer with; nothing has been
// sent then.
func (b *Bridge) startListen(ctx context.Context, principal string, req listenRequest) (*stream, []string, error) {
	if !req.declared {
		return nil, nil, missingCapability(tasksCapability(), TasksExtension)
	}
	if len(req.ids) > b.limits.TasksPerStream {
		b.metrics.reject("stream_tasks")
		return nil, nil, invalidParams("a stream may list at most %d task IDs; this one lists %d: open another stream for the rest", b.limits.TasksPerStream, len(req.ids))
	}
	s := newStream(principal)
	agreed, err := b.hub.open(ctx, s, req.ids)
	if errors.Is(err, errTooManyStreams) {
		b.metrics.reject("streams")
		return nil, nil, &refusal{status: http.StatusTooManyRequests, rpc: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
			"too many open streams: a caller may hold %d on this server; close one (or list more tasks on one stream)", b.limits.StreamsPerPrincipal)}}
	}
	if err != nil {
		return nil, nil, err
	}
	if agreed == nil {
		agreed = []string{}
	}
	return s, agreed, nil
}

// runListen sends the acknowledgement and then the stream's notifications
// until the client goes (ctx), the stream's life ends or the bridge shuts
// down (both end it gracefully). A stream that agreed to no task ends
// right after the acknowledgement.
// end, when not nil, also ends the stream gracefully when it is closed.
func (b *Bridge) runListen(ctx context.Context, s *stream, req listenRequest, agreed []string, sink listenSink, end <-chan struct{}) error {
	defer b.hub.closeStream(s)
	ack, _ := json.Marshal(map[string]any{
		"_meta":         map[string]json.RawMessage{subscriptionMeta: req.id},
		"notifications": map[string]any{"taskIds": agreed},
	})
	if err := sink.send("notifications/subscriptions/acknowledged", ack); err != nil {
		return err
	}
	if len(agreed) == 0 {
		return sink.end()
	}
	life := time.NewTimer(b.limits.MaxStreamLife)
	defer life.Stop()
	keepAlive := time.NewTicker(b.limits.StreamKeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-b.streamsEnd:
			return sink.end()
		case <-end:
			return sink.end()
		case <-life.C:
			return sink.end()
		case <-keepAlive.C:
			if err := sink.idle(); err != nil {
				return err
			}
		case <-s.ready:
			for _, d := range s.take(b) {
				if err := sink.send("notifications/tasks", notification(req.id, d)); err != nil {
					return err
				}
				b.metrics.pushed.WithLabelValues(d.Status).Inc()
			}
			keepAlive.Reset(b.limits.StreamKeepAlive)
		}
	}
}

// serveListenHTTP answers a subscriptions/listen that names tasks over
// Streamable HTTP: a JSON-RPC error, or an SSE stream that lasts until the
// client disconnects or the server ends it with the listen's result.
func (b *Bridge) serveListenHTTP(w http.ResponseWriter, r *http.Request, req listenRequest) {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && v >= modernProtocol {
		// The standard headers of 2026-07-28, as the SDK checks them.
		if m := r.Header.Get("Mcp-Method"); m != "subscriptions/listen" {
			reason := "missing required Mcp-Method header"
			if m != "" {
				reason = fmt.Sprintf("Mcp-Method header value %q does not match body value \"subscriptions/listen\"", m)
			}
			writeHeaderMismatch(w, req.id, reason)
			return
		}
	}
	principal := b.opts.HTTPPrincipal
	if caller, ok := auth.PrincipalFrom(r.Context()); ok && caller != nil {
		principal = principalKeyOf(caller)
	}
	s, agreed, err := b.startListen(r.Context(), principal, req)
	if err != nil {
		writeRPCError(w, req.id, err)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	sink := &sseSink{w: w, rc: http.NewResponseController(w), id: req.id}
	if err := b.runListen(r.Context(), s, req, agreed, sink, nil); err != nil && r.Context().Err() == nil {
		b.log.Debug("listen stream ended", "error", err)
	}
}

// writeRPCError answers an HTTP request with a JSON-RPC error, at the HTTP
// status the 2026-07-28 transport gives its code.
func writeRPCError(w http.ResponseWriter, id json.RawMessage, err error) {
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) {
		rpc = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	status := http.StatusOK
	var ref *refusal
	switch {
	case errors.As(err, &ref):
		status = ref.status
	case rpc.Code == jsonrpc.CodeInvalidParams, rpc.Code == mcp.CodeMissingRequiredClientCapabilities:
		status = http.StatusBadRequest
	}
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *jsonrpc.Error  `json:"error"`
	}{"2.0", id, rpc})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// refusal is a JSON-RPC error with the HTTP status it is answered with.
type refusal struct {
	status int
	rpc    *jsonrpc.Error
}

func (r *refusal) Error() string { return r.rpc.Message }
func (r *refusal) Unwrap() error { return r.rpc }

// sseSink writes a stream as server-sent events.
type sseSink struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	id json.RawMessage
}

// streamWriteTimeout bounds one write to a stream: a client that stops
// reading is dropped rather than holding the stream.
const streamWriteTimeout = 30 * time.Second

func (s *sseSink) event(data []byte) error {
	s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)) // not every ResponseWriter supports it
	buf := make([]byte, 0, len(data)+32)
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := s.w.Write(buf); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sseSink) send(method string, params json.RawMessage) error {
	msg, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}{"2.0", method, params})
	return s.event(msg)
}

func (s *sseSink) idle() error {
	s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := s.w.Write([]byte(": keep-alive\n\n")); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sseSink) end() error {
	msg, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", s.id, map[string]any{
		"resultType": "complete",
		"_meta":      map[string]json.RawMessage{subscriptionMeta: s.id},
	}})
	return s.event(msg)
}

// stdioSink writes a stream's messages on a stdio session's connection,
// between the session's other messages.
type stdioSink struct {
	ctx  context.Context
	conn interface {
		Write(context.Context, jsonrpc.Message) error
	}
	id jsonrpc.ID
}

func (s *stdioSink) send(method string, params json.RawMessage) error {
	return s.conn.Write(s.ctx, &jsonrpc.Request{Method: method, Params: params})
}

// idle sends nothing: a pipe needs no keep-alive.
func (s *stdioSink) idle() error { return nil }

// end tells the client the stream is over: on stdio the server ends a
// subscription with notifications/cancelled for its request.
func (s *stdioSink) end() error {
	params, _ := json.Marshal(map[string]any{
		"requestId": s.id.Raw(),
		"reason":    "the server closed the subscription; listen again to go on",
	})
	return s.conn.Write(s.ctx, &jsonrpc.Request{Method: "notifications/cancelled", Params: params})
}
