package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// --log-format json writes one JSON object per line; text stays key=value;
// anything else is refused.
func TestLogFormat(t *testing.T) {
	for _, tc := range []struct {
		format string
		check  func(t *testing.T, out string)
	}{
		{"json", func(t *testing.T, out string) {
			var rec map[string]any
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &rec); err != nil {
				t.Fatalf("log line %q is not JSON: %v", out, err)
			}
			if rec["msg"] != "task created" || rec["tool"] != "build" || rec["level"] != "INFO" {
				t.Errorf("log record %v", rec)
			}
		}},
		{"text", func(t *testing.T, out string) {
			if !strings.Contains(out, `msg="task created" tool=build`) {
				t.Errorf("log line %q, want key=value", out)
			}
		}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			asJSON, err := parseLogFormat(tc.format)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			newLogger(&buf, slog.LevelInfo, asJSON).Info("task created", "tool", "build")
			tc.check(t, buf.String())
		})
	}
	if _, err := parseLogFormat("yaml"); err == nil || !strings.Contains(err.Error(), "not text or json") {
		t.Errorf("--log-format yaml: %v, want a refusal", err)
	}
}
