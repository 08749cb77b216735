package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsageErrorsSayWhatIsMissing runs each command with arguments a user
// gets wrong: the first line on stderr says what is wrong, the rest is at
// most the synopsis and where the help is, and the exit status is 2.
func TestUsageErrorsSayWhatIsMissing(t *testing.T) {
	tests := []struct {
		args []string
		want string // the first line on stderr
	}{
		{[]string{"serve"}, "jobbridge serve: missing --config FILE, the catalog to serve"},
		{[]string{"serve", "--config", "c.yaml", "extra"}, `jobbridge serve: unexpected argument "extra" (the catalog is given with --config FILE)`},
		{[]string{"serve", "--colour"}, "jobbridge serve: flag provided but not defined: -colour"},
		{[]string{"serve", "--config"}, "jobbridge serve: flag needs an argument: -config"},
		{[]string{"demo", "configs/demo.yaml"}, `jobbridge demo: unexpected argument "configs/demo.yaml" (the catalog is given with --config FILE)`},
		{[]string{"demo", "--stdio", "--auth"}, "jobbridge demo: --auth applies to HTTP only; stdio has no bearer tokens"},
		{[]string{"call"}, "jobbridge call: missing the TOOL to call"},
		{[]string{"call", "build_report", "{"}, "jobbridge call: JSON_ARGS is not valid JSON: unexpected end of JSON input (at byte 1 of {)"},
		{[]string{"task"}, "jobbridge task: missing the action (get, watch, answer or cancel) and the task ID"},
		{[]string{"task", "get"}, `jobbridge task: missing the task ID after "get"`},
		{[]string{"task", "poke", "x"}, `jobbridge task: unknown action "poke" (want get, watch, answer or cancel)`},
		{[]string{"tools", "extra"}, `jobbridge tools: unexpected argument "extra"`},
		{[]string{"version", "extra"}, `jobbridge version: unexpected argument "extra"`},
		{[]string{"completion"}, "jobbridge completion: missing the shell: bash, zsh or fish"},
		{[]string{"completion", "tcsh"}, `jobbridge completion: unknown shell "tcsh" (want bash, zsh or fish)`},
		{[]string{"validate"}, "jobbridge validate: missing the catalog FILE to check (the built-in demo catalog: jobbridge demo --check)"},
		{[]string{"tasks", "--store", "sqlite:t.db"}, "jobbridge tasks: missing the action: list or cancel"},
		{[]string{"tasks", "show", "--store", "sqlite:t.db"}, `jobbridge tasks: unknown action "show" (want list or cancel)`},
		{[]string{"tasks", "list", "extra", "--store", "sqlite:t.db"}, `jobbridge tasks: unexpected argument "extra" after the action`},
		{[]string{"tasks", "list", "--store", ""}, "jobbridge tasks: missing --store URL (or $JOBBRIDGE_STORE), the task store to read"},
		{[]string{"tasks", "list", "--store", "sqlite:t.db", "--state", "done"}, `jobbridge tasks: --state "done": want working, input_required, completed, failed or cancelled (comma-separated), live or all`},
		{[]string{"tasks", "cancel", "--store", "sqlite:t.db"}, "jobbridge tasks: missing --correlation ID, the task to cancel"},
		{[]string{"tasks", "cancel", "--store", "sqlite:t.db", "--correlation", "jb-1", "--tool", "deploy"}, "jobbridge tasks: --state and --tool select tasks to list; cancel takes --correlation ID"},
		{[]string{"try", "build_report"}, "jobbridge try: missing --config FILE, the catalog of the tool"},
		{[]string{"try", "--config", "c.yaml"}, "jobbridge try: missing the TOOL to call"},
		{[]string{"try", "--config", "c.yaml", "t", "{}", "extra"}, `jobbridge try: unexpected argument "extra" after TOOL and JSON_ARGS`},
		{[]string{"try", "--config", "c.yaml", "t", "[1]"}, "jobbridge try: JSON_ARGS must be a JSON object, not a JSON array: [1]"},
		{[]string{"try", "--colour"}, "jobbridge try: flag provided but not defined: -colour"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), tt.args, strings.NewReader(""), &stdout, &stderr)
			if !errors.Is(err, exitError(2)) {
				t.Errorf("exit %v, want exit status 2", err)
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if lines[0] != tt.want {
				t.Errorf("stderr begins %q, want %q", lines[0], tt.want)
			}
			if len(lines) > 3 || (len(lines) > 1 && !strings.HasPrefix(lines[1], "usage: jobbridge "+tt.args[0])) {
				t.Errorf("stderr is more than the problem, the synopsis and the hint:\n%s", stderr.String())
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout: %s", stdout.String())
			}
		})
	}
}

func TestUnknownCommandIsAUsageError(t *testing.T) {
	for _, args := range [][]string{nil, {"serv"}} {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), args, nil, &stdout, &stderr)
		if !errors.Is(err, exitError(2)) {
			t.Errorf("%q: exit %v, want exit status 2", args, err)
		}
		if first, _, _ := strings.Cut(stderr.String(), "\n"); !strings.HasPrefix(first, "jobbridge: ") {
			t.Errorf("%q: stderr begins %q, want what is wrong", args, first)
		}
	}
}

// TestCompletionScripts checks that the bash script parses and completes
// every command and each command's flags, and that zsh and fish get one.
func TestCompletionScripts(t *testing.T) {
	for _, name := range commandNames {
		var stderr bytes.Buffer
		if err := run(t.Context(), []string{name, "--no-such-flag"}, strings.NewReader(""), io.Discard, &stderr); strings.Contains(stderr.String(), "unknown command") {
			t.Errorf("completion offers %q, which is no command: %v", name, err)
		}
	}
	var bash bytes.Buffer
	if err := run(t.Context(), []string{"completion", "bash"}, nil, &bash, io.Discard); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "jobbridge.bash")
	if err := os.WriteFile(script, bash.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	for _, name := range commandNames {
		if !strings.Contains(bash.String(), "    "+name+")\n") {
			t.Errorf("the bash script has no case for %s", name)
		}
	}
	for _, want := range []string{"--config", "--listen", "--store", "--watch", "--url", "--no-wait", "get watch answer cancel"} {
		if !strings.Contains(bash.String(), want) {
			t.Errorf("the bash script does not offer %s", want)
		}
	}
	// Completing "jobbridge ser" offers serve.
	out, err := exec.Command("bash", "-c", "source "+script+`; COMP_WORDS=(jobbridge ser); COMP_CWORD=1; _jobbridge; echo "${COMPREPLY[@]}"`).Output()
	if err != nil || strings.TrimSpace(string(out)) != "serve" {
		t.Errorf("completing %q: %q %v", "jobbridge ser", out, err)
	}
	for _, shell := range []string{"zsh", "fish"} {
		var out bytes.Buffer
		if err := run(t.Context(), []string{"completion", shell}, nil, &out, io.Discard); err != nil || !strings.Contains(out.String(), "serve") {
			t.Errorf("completion %s: %v\n%s", shell, err, out.String())
		}
	}
}
