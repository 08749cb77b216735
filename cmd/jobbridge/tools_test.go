package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/taskclient"
)

func TestToolsListsTaskModes(t *testing.T) {
	s := newTestServer(t)
	t.Setenv("COLUMNS", "200")
	stdout, stderr, err := runCommand(t, t.Context(), "", "tools", "--url", s.url)
	if err != nil {
		t.Fatalf("tools: %v\n%s", err, stderr)
	}
	modes := map[string]string{}
	for i, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		f := strings.Fields(line)
		if i == 0 {
			if diff := cmp.Diff([]string{"NAME", "TASK", "DESCRIPTION"}, f); diff != "" {
				t.Errorf("header (-want +got):\n%s", diff)
			}
			continue
		}
		modes[f[0]] = f[1]
	}
	want := map[string]string{"greet": "never", "slow_compute": "optional", "failing_job": "required", "confirm_delete": "optional", "test_tool_with_task": "required"}
	for name, mode := range want {
		if modes[name] != mode {
			t.Errorf("tool %s: mode %q, want %q\n%s", name, modes[name], mode, stdout)
		}
	}
	if !strings.Contains(stdout, "Runs for the given number of seconds") {
		t.Errorf("no description in:\n%s", stdout)
	}
}

func TestToolTableFitsTheWidth(t *testing.T) {
	tools := []taskclient.Tool{
		{Name: "deploy", Title: "Deploy a service to production, after a confirmation and a long explanation"},
		{Name: "report", Description: "First line of the description.\nSecond line."},
		{Name: "bare"},
	}
	var buf bytes.Buffer
	writeToolTable(&buf, tools, map[string]string{"deploy": "required", "report": "never"}, 40)
	want := "NAME    TASK      DESCRIPTION\n" +
		"deploy  required  Deploy a service to …\n" +
		"report  never     First line of the de…\n" +
		"bare    ?\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	for _, line := range strings.Split(buf.String(), "\n") {
		if n := utf8.RuneCountInString(line); n >= 40 {
			t.Errorf("line of %d runes on 40 columns: %q", n, line)
		}
	}
}

func TestToolsRefusedConnection(t *testing.T) {
	_, _, err := runCommand(t, t.Context(), "", "tools", "--url", "http://127.0.0.1:1/mcp")
	if err == nil || !strings.Contains(err.Error(), "is the server running at http://127.0.0.1:1/mcp?") {
		t.Errorf("tools: %v", err)
	}
}

func TestCallSuggestsTheNearestTool(t *testing.T) {
	s := newTestServer(t)
	tests := []struct {
		tool, want string
	}{
		{"slow_compte", `unknown tool "slow_compte"; did you mean "slow_compute"?`},
		{"gret", `did you mean "greet"?`},
		{"nothing_like_it", `unknown tool "nothing_like_it" (jobbridge tools lists the server's tools)`},
	}
	for _, tt := range tests {
		_, _, err := runCommand(t, t.Context(), "", "call", "--url", s.url, tt.tool)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("call %s: %v, want %q", tt.tool, err, tt.want)
		}
	}
}
