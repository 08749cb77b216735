package bridge

import (
	"context"
	"errors"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/jobbridge/jobbridge/mapping"
)

// Tracing. Each MCP request is a span named for its method; each backend
// call is a child span (see meteredAdapter); task lifecycle events are span
// events on the span that caused them. Attributes never carry task IDs,
// principals, arguments or secrets: a task is named by its short hash (the
// one the logs use), a caller by its kind.

// tracerName is the instrumentation scope of the bridge's spans.
const tracerName = "github.com/jobbridge/jobbridge/bridge"

// Attribute keys of the bridge's spans and events.
const (
	attrTool          = attribute.Key("jobbridge.tool")
	attrTaskHash      = attribute.Key("jobbridge.task.hash")
	attrPrincipalKind = attribute.Key("jobbridge.principal.kind")
	attrProtocol      = attribute.Key("mcp.protocol.version")
	attrErrorCode     = attribute.Key("rpc.jsonrpc.error_code")
	attrBackend       = attribute.Key("jobbridge.backend")
	attrOperation     = attribute.Key("jobbridge.backend.operation")
	attrOutcome       = attribute.Key("jobbridge.backend.outcome")
	attrState         = attribute.Key("jobbridge.task.state")
	attrFromState     = attribute.Key("jobbridge.task.from_state")
)

// newTracer returns the bridge's tracer from tp; nil is the no-op provider.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// traceRequests is the outermost receiving middleware: it runs every MCP
// request in a span named for its method.
func (b *Bridge) traceRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ctx, span := b.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		if !span.IsRecording() {
			return next(ctx, method, req)
		}
		span.SetAttributes(attrPrincipalKind.String(b.principalKind(req)))
		if v := protocolOf(req); v != "" {
			span.SetAttributes(attrProtocol.String(v))
		}
		switch p := req.GetParams().(type) {
		case *mcp.CallToolParamsRaw:
			// Only a catalog tool's name: an unknown name is the client's
			// own text.
			if p != nil && b.toolNamed(p.Name) != nil {
				span.SetAttributes(attrTool.String(p.Name))
			}
		case *taskParams:
			if p != nil && p.TaskID != "" {
				span.SetAttributes(attrTaskHash.String(shortKey(mapping.KeyOf(p.TaskID))))
			}
		}
		res, err := next(ctx, method, req)
		if err != nil {
			code := int64(jsonrpc.CodeInternalError)
			var we *jsonrpc.Error
			if errors.As(err, &we) {
				code = we.Code
			}
			span.SetAttributes(attrErrorCode.Int64(code))
			span.SetStatus(codes.Error, "JSON-RPC error "+strconv.FormatInt(code, 10))
		}
		return res, err
	}
}

// principalKind names the kind of caller a request comes from: stdio, http
// (the shared principal of a server without authentication) or
// authenticated. The principal itself is never recorded.
func (b *Bridge) principalKind(req mcp.Request) string {
	extra := req.GetExtra()
	switch {
	case extra == nil || extra.Header == nil:
		return "stdio"
	case b.opts.Auth != nil:
		return "authenticated"
	}
	return "http"
}

// protocolOf is the protocol revision a request follows: its own
// _meta protocol version, else the one its session or header negotiated.
// Only a value shaped like a revision (YYYY-MM-DD) is recorded.
func protocolOf(req mcp.Request) string {
	v := ""
	if meta := metaOf(req); meta != nil {
		v, _ = meta[mcp.MetaKeyProtocolVersion].(string)
	}
	if v == "" {
		v = negotiatedVersion(req)
	}
	if !isRevision(v) {
		if v == "" {
			return ""
		}
		return "other"
	}
	return v
}

func isRevision(v string) bool {
	if len(v) != 10 || v[4] != '-' || v[7] != '-' {
		return false
	}
	for i, c := range v {
		if i != 4 && i != 7 && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// taskEvent adds a lifecycle event of task t to the span in ctx. Work that
// runs outside any request (a submission, the sweep) has no span; the event
// then gets a span of its own, joined to the request spans by the task hash.
func (b *Bridge) taskEvent(ctx context.Context, name string, t *mapping.Task, attrs ...attribute.KeyValue) {
	attrs = append(attrs, attrTaskHash.String(shortKey(t.Key)), attrTool.String(t.Tool))
	span := trace.SpanFromContext(ctx)
	if !span.SpanContext().IsValid() {
		_, span = b.tracer.Start(ctx, "task "+name, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(attrTaskHash.String(shortKey(t.Key)), attrTool.String(t.Tool)))
		defer span.End()
	}
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrTaskHash.String(shortKey(t.Key)))
	span.AddEvent(name, trace.WithAttributes(attrs...))
}
