package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The environment the client commands (call, task, tools) read, so that a
// secured server needs no flags on every command:
//
//	JOBBRIDGE_URL    the MCP endpoint (--url overrides it)
//	JOBBRIDGE_TOKEN  a bearer token (an --header 'Authorization: ...' overrides it)

// envOr returns the variable's value, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// withEnvToken adds $JOBBRIDGE_TOKEN as a bearer token to h unless h has an
// Authorization header already.
func withEnvToken(h http.Header) http.Header {
	if tok := os.Getenv("JOBBRIDGE_TOKEN"); tok != "" && h.Get("Authorization") == "" {
		h.Set("Authorization", "Bearer "+strings.TrimPrefix(tok, "Bearer "))
	}
	return h
}

// selfCommand is how the user runs this binary, for the commands the demo
// prints: "jobbridge" when that name on PATH is this binary, "go run
// ./cmd/jobbridge" under go run, else the binary's path.
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return "jobbridge"
	}
	if onPath, err := lookPathSame("jobbridge", exe); err == nil && onPath {
		return "jobbridge"
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "go run ./cmd/jobbridge"
	}
	return shellQuoteIfNeeded(exe)
}

// lookPathSame reports whether name on PATH is the file exe.
func lookPathSame(name, exe string) (bool, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return false, err
	}
	a, err := os.Stat(p)
	if err != nil {
		return false, err
	}
	b, err := os.Stat(exe)
	if err != nil {
		return false, err
	}
	return os.SameFile(a, b), nil
}

// shellQuoteIfNeeded quotes s for a POSIX shell when it holds characters
// the shell would read.
func shellQuoteIfNeeded(s string) string {
	if strings.ContainsAny(s, " \t'\"$`\\!*?[]{}()<>|&;#~") {
		return shellQuote(s)
	}
	return s
}
