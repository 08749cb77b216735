package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
)

// TestServeTracingFromEnvironment checks the tracing set-up of serve: off
// without the OTLP variables, and with OTEL_EXPORTER_OTLP_ENDPOINT set, spans
// reach the collector's /v1/traces by the time the server stops.
func TestServeTracingFromEnvironment(t *testing.T) {
	tp, stop, err := newTracerProvider(t.Context(), func(string) (string, bool) { return "", false })
	if err != nil || tp != nil {
		t.Fatalf("without OTLP variables: provider %v, error %v; want none", tp, err)
	}
	stop()

	var posts atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			posts.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	tp, stop, err = newTracerProvider(t.Context(), os.LookupEnv)
	if err != nil || tp == nil {
		t.Fatalf("with OTEL_EXPORTER_OTLP_ENDPOINT: provider %v, error %v", tp, err)
	}
	_, span := tp.Tracer("test").Start(t.Context(), "tools/call")
	span.End()
	stop()
	if posts.Load() == 0 {
		t.Error("no span export reached the collector at shutdown")
	}
}
