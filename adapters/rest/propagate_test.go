package rest

import (
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"gopkg.in/yaml.v3"
)

// TestPropagateTrace checks that the W3C traceparent of the caller's span
// reaches the API when the backend says propagate_trace, carrying the span's
// trace ID, and that nothing is sent without it.
func TestPropagateTrace(t *testing.T) {
	tests := []struct {
		name      string
		propagate bool
	}{
		{name: "on", propagate: true},
		{name: "off (default)", propagate: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := sdktrace.NewTracerProvider()
			t.Cleanup(func() { tp.Shutdown(t.Context()) })
			ctx, span := tp.Tracer("test").Start(t.Context(), "backend start")
			defer span.End()

			backend := testBackend()
			backend.PropagateTrace = tt.propagate
			f := newFixture(t, backend, testJob())
			f.on("POST", "/projects/p/jobs", jsonResponder(201, `{"id":"job-7"}`))
			if _, err := f.a.Start(ctx, startReq(map[string]any{"project": "p"})); err != nil {
				t.Fatalf("Start: %v", err)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("got %d requests, want 1", len(reqs))
			}
			got := reqs[0].Header.Get("Traceparent")
			traceID := span.SpanContext().TraceID().String()
			switch {
			case tt.propagate && !strings.Contains(got, traceID):
				t.Errorf("traceparent = %q, want one carrying trace %s", got, traceID)
			case !tt.propagate && got != "":
				t.Errorf("traceparent = %q sent without propagate_trace", got)
			}
		})
	}
}

// TestPropagateTraceConfigKey checks the catalog key's spelling.
func TestPropagateTraceConfigKey(t *testing.T) {
	var c BackendConfig
	if err := yaml.Unmarshal([]byte("base_url: http://127.0.0.1/\npropagate_trace: true\n"), &c); err != nil {
		t.Fatal(err)
	}
	if !c.PropagateTrace {
		t.Error("propagate_trace: true did not set PropagateTrace")
	}
}
