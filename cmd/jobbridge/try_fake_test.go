package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTryFakeUsesTheExamplesOwnFake tries the Kubernetes example offline:
// its fake.yaml answers as the Kubernetes API does, the catalog's
// ${file:} service-account token becomes a placeholder, and the job runs
// to its end. (The catalog is copied with a shorter poll interval, so
// that the test does not wait the example's 5s polls.)
func TestTryFakeUsesTheExamplesOwnFake(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"catalog.yaml", "fake.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../examples/kubernetes", name))
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		if name == "catalog.yaml" {
			text = strings.Replace(text, "  poll_interval: 5s\n", "  poll_interval: 100ms\n  refresh_interval: 100ms\n", 1)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stdout, stderr, err := runTryCommand(t, "--fake", "--yes", "--config", filepath.Join(dir, "catalog.yaml"),
		"run_migration", `{"image": "registry.example.com/migrate:1.4", "target": "orders"}`)
	if err != nil {
		t.Fatalf("try: %v\n%s\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stderr, "rest backends point at the example's scripted fake ("+filepath.Join(dir, "fake.yaml")+")") {
		t.Errorf("try does not say which fake serves:\n%s", stderr)
	}
	if !strings.Contains(stdout, `"status": "completed"`) || !strings.Contains(stdout, `"isError": false`) {
		t.Errorf("the job did not complete:\n%s", stdout)
	}
}

func TestRebase(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"https://dbc.cloud.databricks.com", "http://127.0.0.1:9"},
		{"https://dbc.cloud.databricks.com/oidc/v1/token", "http://127.0.0.1:9/oidc/v1/token"},
		{"", ""},
		{"/relative/token", "/relative/token"},
	} {
		if got := rebase(tt.in, "http://127.0.0.1:9"); got != tt.want {
			t.Errorf("rebase(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
