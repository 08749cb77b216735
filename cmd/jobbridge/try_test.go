package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// runTryCommand runs `jobbridge try` with args and an empty stdin.
func runTryCommand(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err = run(ctx, append([]string{"try"}, args...), strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

// finalTask decodes the task printed at the end of try's output.
func finalTask(t *testing.T, stdout string) map[string]any {
	t.Helper()
	_, after, ok := strings.Cut(stdout, "\ntask (tasks/get):\n")
	if !ok {
		t.Fatalf("no final task in the output:\n%s", stdout)
	}
	var task map[string]any
	if err := json.Unmarshal([]byte(after), &task); err != nil {
		t.Fatalf("final task is not JSON: %v\n%s", err, after)
	}
	return task
}

func TestTryFakeDemo(t *testing.T) {
	const secret = "try-demo-secret-4f1c9a"
	t.Setenv("JOBS_API_TOKEN", secret)
	stdout, stderr, err := runTryCommand(t, "--fake", "--config", "../../configs/demo.yaml",
		"build_report", `{"report": "sales", "seconds": 0}`)
	if err != nil {
		t.Fatalf("try: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^→ start  POST http://127\.0\.0\.1:\d+/jobs$`),
		regexp.MustCompile(`(?m)^         Authorization: Bearer \[redacted\]$`),
		regexp.MustCompile(`(?m)^← start  HTTP 201$`),
		regexp.MustCompile(`(?m)^· start  job_id\.field id → "job-\d+"$`),
		regexp.MustCompile(`(?m)^→ status GET http://127\.0\.0\.1:\d+/jobs/job-\d+$`),
		regexp.MustCompile(`(?m)^· status status\.field status → "\w+" → (working|succeeded)$`),
	} {
		if !want.MatchString(stdout) {
			t.Errorf("output lacks a line matching %s:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout+stderr, secret) {
		t.Errorf("the token's value appears in the output:\n%s\n%s", stdout, stderr)
	}
	task := finalTask(t, stdout)
	if task["status"] != "completed" {
		t.Errorf("final task status = %v, want completed:\n%s", task["status"], stdout)
	}
	if res, _ := task["result"].(map[string]any); res == nil || res["isError"] == true {
		t.Errorf("final task result = %v, want a result without isError", task["result"])
	}
}

// hpcAPI is a REST job API for try-hpc.yaml: a submission named "qos" is
// refused with HTTP 500 and a Slurm-style error body; any other is job 7,
// done at once.
type hpcAPI struct {
	mu       sync.Mutex
	requests []string // method and path of each request
	tokens   []string // X-API-Token of each request
}

func (h *hpcAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.requests = append(h.requests, r.Method+" "+r.URL.Path)
	h.tokens = append(h.tokens, r.Header.Get("X-API-Token"))
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/jobs" && bytes.Contains(body, []byte(`"name":"qos"`)):
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"errors":[{"error_number":2035,"description":"Job violates QOS policy"}]}`)
	case r.Method == http.MethodPost && r.URL.Path == "/jobs":
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"7"}`)
	case r.Method == http.MethodGet && r.URL.Path == "/jobs/7":
		io.WriteString(w, `{"status":"done"}`)
	default:
		http.NotFound(w, r)
	}
}

func (h *hpcAPI) seen() (requests, tokens []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.requests...), append([]string(nil), h.tokens...)
}

// hpcCatalog starts an hpcAPI and writes try-hpc.yaml pointed at it.
func hpcCatalog(t *testing.T) (*hpcAPI, string) {
	t.Helper()
	api := &hpcAPI{}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	raw, err := os.ReadFile("testdata/try-hpc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const placeholder = "base_url: http://127.0.0.1:9/"
	if !bytes.Contains(raw, []byte(placeholder)) {
		t.Fatalf("testdata/try-hpc.yaml lacks %q", placeholder)
	}
	raw = bytes.Replace(raw, []byte(placeholder), []byte("base_url: "+srv.URL+"/"), 1)
	path := filepath.Join(t.TempDir(), "try-hpc.yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return api, path
}

func TestTryShowsOutcomeRuleOfRefusedStart(t *testing.T) {
	const secret = "try-hpc-secret-77d2"
	t.Setenv("TRY_TEST_TOKEN", secret)
	api, path := hpcCatalog(t)
	stdout, stderr, err := runTryCommand(t, "--config", path, "submit", `{"case": "qos"}`)
	if err == nil || err.Error() != "tool reported an error" {
		t.Errorf("try = %v for a refused submission, want the tool's error (exit status 1, as call)", err)
	}
	for _, want := range []string{
		"\n→ start  POST http://127.0.0.1:",
		"\n         X-Api-Token: [redacted]\n",
		"\n← start  HTTP 500\n",
		`"description":"Job violates QOS policy"`,
		"\n· start  start.outcomes[0] matches HTTP 500 → refused\n",
	} {
		if !strings.Contains("\n"+stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout+stderr, secret) {
		t.Errorf("the token's value appears in the output:\n%s\n%s", stdout, stderr)
	}
	// A refused submission is the tool's error, not the protocol's (see
	// README, "How a call becomes a task"): completed with isError, in the
	// backend's words.
	task := finalTask(t, stdout)
	res, _ := task["result"].(map[string]any)
	if task["status"] != "completed" || res == nil || res["isError"] != true {
		t.Errorf("final task = %v, want completed with an isError result:\n%s", task["status"], stdout)
	}
	if msg, _ := task["statusMessage"].(string); !strings.Contains(msg, "Job violates QOS policy") {
		t.Errorf("final task's statusMessage = %q, want the backend's words", msg)
	}
	if text, _ := json.Marshal(res["content"]); !strings.Contains(string(text), "Job violates QOS policy") {
		t.Errorf("final task's result = %s, want the backend's words", text)
	}
	requests, tokens := api.seen()
	if len(requests) != 1 || requests[0] != "POST /jobs" || tokens[0] != secret {
		t.Errorf("backend saw %v with tokens %q, want one POST /jobs with the token", requests, tokens)
	}
}

func TestTryConfirmation(t *testing.T) {
	t.Setenv("TRY_TEST_TOKEN", "try-token")
	t.Run("yes confirms", func(t *testing.T) {
		api, path := hpcCatalog(t)
		stdout, stderr, err := runTryCommand(t, "--yes", "--config", path, "deploy", `{"case": "blue"}`)
		if err != nil {
			t.Fatalf("try: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}
		if !strings.Contains(stderr, "confirmed (--yes)") {
			t.Errorf("stderr does not say the call was confirmed:\n%s", stderr)
		}
		if !strings.Contains(stdout, "\n· status status.field status → \"done\" → succeeded\n") {
			t.Errorf("output lacks the status rule line:\n%s", stdout)
		}
		if task := finalTask(t, stdout); task["status"] != "completed" {
			t.Errorf("final task status = %v, want completed", task["status"])
		}
		if requests, _ := api.seen(); len(requests) == 0 || requests[0] != "POST /jobs" {
			t.Errorf("backend saw %v, want a POST /jobs first", requests)
		}
	})
	t.Run("no answer submits nothing", func(t *testing.T) {
		api, path := hpcCatalog(t)
		stdout, stderr, err := runTryCommand(t, "--config", path, "deploy", `{"case": "blue"}`)
		if err == nil {
			t.Errorf("try succeeded without a confirmation; want an error\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
		}
		if task := finalTask(t, stdout); task["status"] != "cancelled" {
			t.Errorf("final task status = %v, want cancelled", task["status"])
		}
		if requests, _ := api.seen(); len(requests) != 0 {
			t.Errorf("backend saw %v without a confirmation, want nothing", requests)
		}
	})
}

func TestTryUsage(t *testing.T) {
	t.Run("help", func(t *testing.T) {
		stdout, stderr, err := runTryCommand(t, "--help")
		if err != nil {
			t.Fatalf("try --help: %v", err)
		}
		if stderr != "" {
			t.Errorf("try --help wrote to stderr:\n%s", stderr)
		}
		for _, want := range []string{"usage: jobbridge try", "Example:", "jobbridge try --fake --config configs/demo.yaml build_report", "-yes", "-timeout"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("help lacks %q:\n%s", want, stdout)
			}
		}
	})
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error
	}{
		{"no config", []string{"build_report"}, ""},
		{"no tool", []string{"--config", "../../configs/demo.yaml"}, ""},
		{"unknown flag", []string{"--colour", "--config", "../../configs/demo.yaml", "build_report"}, ""},
		{"arguments not an object", []string{"--fake", "--config", "../../configs/demo.yaml", "build_report", "[1]"}, ""},
		{"unknown tool", []string{"--fake", "--config", "../../configs/demo.yaml", "nosuch"}, `has no tool "nosuch" (tools: build_report,`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := runTryCommand(t, tc.args...)
			if tc.want == "" {
				var exit exitError
				if !errors.As(err, &exit) || exit != 2 || !strings.Contains(stderr, "usage: jobbridge try") {
					t.Errorf("try %v = %v, stderr %q; want exit status 2 with the usage", tc.args, err, stderr)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("try %v = %v, want an error containing %q", tc.args, err, tc.want)
			}
		})
	}
}

// TestTryReportsABackendThatCannotBeBuilt: when a backend's secret cannot
// be had (a ${file:PATH} that does not exist, an unset ${NAME}), try says
// so as serve does, naming the backend and the secret, and fails; it does
// not panic.
func TestTryReportsABackendThatCannotBeBuilt(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-token")
	tests := []struct {
		name   string
		header string
		want   string
	}{
		{"missing secret file", "${file:" + missing + "}", "secret file " + missing + ": no such file or directory"},
		{"unset variable", "${TRY_TEST_UNSET_TOKEN}", "environment variable TRY_TEST_UNSET_TOKEN is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, path := hpcCatalog(t)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			raw = bytes.Replace(raw, []byte("X-API-Token: ${TRY_TEST_TOKEN}"), []byte(`X-API-Token: "`+tt.header+`"`), 1)
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, err := runTryCommand(t, "--config", path, "submit", `{"case": "a"}`)
			if err == nil {
				t.Fatalf("try succeeded with a backend that cannot be built\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
			var exit exitError
			if errors.As(err, &exit) {
				t.Fatalf("try = %v, want the error itself (main prints it and exits 1)", err)
			}
			// One sentence: the backend, the field, the secret and what is
			// wrong, as serve says it.
			if want := `backend "hpc": headers.X-API-Token: ` + tt.want; err.Error() != want {
				t.Errorf("try error\n  %s\nwant\n  %s", err, want)
			}
		})
	}
}
