package catalog

import (
	"context"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters/expr"
)

func TestParseCalls(t *testing.T) {
	src := `
version: 1
backends:
  jobs: {type: rest, base_url: "https://jobs.example.com"}
tools:
  - name: deploy
    description: Deploy a release.
    backend: jobs
    idempotency_key: "deploy-{args.release}-{args.env}"
    idempotency_window: 2h
    inline_within: 2s
    input_schema: {type: object, properties: {release: {type: string}, env: {type: string}}}
    job:
      start: {path: /jobs}
      job_id: {field: id}
      status: {path: "/jobs/{job.id}", field: status, states: {done: succeeded}}
  - name: plain
    description: No call options.
    backend: jobs
    input_schema: {type: object}
    job:
      start: {path: /jobs}
      job_id: {field: id}
      status: {path: "/jobs/{job.id}", field: status, states: {done: succeeded}}
`
	c, err := Parse("inline.yaml", []byte(src), adapterTypes...)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	deploy := c.Tool("deploy").Calls
	if deploy.IdempotencyKey == nil {
		t.Fatal("deploy: IdempotencyKey = nil")
	}
	key, _, err := deploy.IdempotencyKey.Render(context.Background(), expr.CallVars(map[string]any{"release": "v1.2", "env": "prod"}, ""), expr.Raw, nil)
	if err != nil || key != "deploy-v1.2-prod" {
		t.Errorf("deploy key renders %q, %v; want %q", key, err, "deploy-v1.2-prod")
	}
	if deploy.IdempotencyWindow != 2*time.Hour || deploy.InlineWithin != 2*time.Second {
		t.Errorf("deploy: window %s, inline_within %s; want 2h, 2s", deploy.IdempotencyWindow, deploy.InlineWithin)
	}
	plain := c.Tool("plain").Calls
	if plain.IdempotencyKey != nil || plain.InlineWithin != 0 || plain.Window() != DefaultIdempotencyWindow {
		t.Errorf("plain: %+v; want no key, no inline, the default window", plain)
	}
}
