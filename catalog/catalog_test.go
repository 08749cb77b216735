package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/adapters/awsbatch"
	"github.com/jobbridge/jobbridge/adapters/githubactions"
	"github.com/jobbridge/jobbridge/adapters/rest"
)

// adapterTypes are the backend types of the adapters, as the binary hands
// them to the loader: the testdata catalogs use all three.
var adapterTypes = []BackendType{
	{
		Name:      "rest",
		NewConfig: func() Block { return new(rest.BackendConfig) },
		NewJob:    func() JobBlock { return new(rest.JobConfig) },
		EnvValues: func(c Block) []string {
			var values []string
			for _, v := range c.(*rest.BackendConfig).Headers {
				values = append(values, v)
			}
			return values
		},
	},
	{
		Name:      "aws_batch",
		NewConfig: func() Block { return new(awsbatch.BackendConfig) },
		NewJob:    func() JobBlock { return new(awsbatch.JobConfig) },
	},
	{
		Name:      "github_actions",
		NewConfig: func() Block { return new(githubactions.BackendConfig) },
		NewJob:    func() JobBlock { return new(githubactions.JobConfig) },
		EnvValues: func(c Block) []string { return []string{c.(*githubactions.BackendConfig).Token} },
	},
}

var update = flag.Bool("update", false, "rewrite the testdata/*.errors golden files")

func revision(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:12]
}

func ptr[T any](v T) *T { return &v }

func TestLoadValid(t *testing.T) {
	const file = "testdata/valid.yaml"
	got, err := Load(file, adapterTypes...)
	if err != nil {
		t.Fatalf("Load(%s): %v", file, err)
	}

	jobs := &rest.BackendConfig{
		BaseURL: "http://127.0.0.1:9000/api",
		Headers: map[string]string{
			"Authorization": "Bearer ${JOBS_TOKEN}",
			"X-Team":        "${TEAM}-${JOBS_TOKEN}",
		},
		Timeout:           5 * time.Second,
		MaxRetries:        ptr(2),
		ListingLag:        ptr(time.Minute),
		IdempotencyHeader: "Idempotency-Key",
		AllowNetworks:     []string{"127.0.0.0/8"},
	}
	archive := &rest.BackendConfig{BaseURL: "https://archive.example.com"}
	archive.SetDefaults()

	slowJob := &rest.JobConfig{
		Start: rest.Call{
			Path:    "/jobs",
			Headers: map[string]string{"X-Label": "{args.label}"},
			Body: map[string]any{
				"duration_seconds": "{args.seconds}",
				"tags":             []any{"demo", "{args.label}"},
				"retry":            false,
				"priority":         3,
				"ratio":            0.5,
				"note":             nil,
			},
		},
		JobID: rest.JobIDConfig{Field: "id"},
		Status: rest.StatusConfig{
			Call:  rest.Call{Path: "/jobs/{job.id}"},
			Field: "status",
			States: map[string]string{
				"running": "working", "succeeded": "succeeded", "failed": "tool_error", "cancelled": "cancelled",
			},
			Message:  "message",
			Progress: &rest.ProgressConfig{Done: "done", Total: "total"},
			Result:   &rest.ResultConfig{Text: "output"},
			Links:    map[string]string{"Logs": "{base_url}/jobs/{job.id}/logs"},
		},
		Cancel: &rest.Call{Method: "delete", Path: "/jobs/{job.id}"},
	}
	slowJob.SetDefaults()
	deleteJob := &rest.JobConfig{
		Start: rest.Call{Path: "/delete", Query: map[string]string{"name": "{args.filename}"}},
		JobID: rest.JobIDConfig{FromLocation: true},
		Status: rest.StatusConfig{
			Call:   rest.Call{Path: "{job.location}"},
			Field:  "state",
			States: map[string]string{"DONE": "succeeded"},
		},
	}
	deleteJob.SetDefaults()
	var limits Limits
	limits.SetDefaults()

	want := &Catalog{
		File:     file,
		Revision: revision(t, file),
		Limits:   limits,
		Server: Server{
			Name:         "jobbridge-demo",
			Version:      "0.1.0",
			Instructions: "Runs demo jobs on the local job API.",
		},
		Backends: map[string]*Backend{
			"jobs":    {Name: "jobs", Type: "rest", Config: jobs, EnvRefs: []string{"JOBS_TOKEN", "TEAM"}, Pos: Position{file, 14, 3}},
			"archive": {Name: "archive", Type: "rest", Config: archive, Pos: Position{file, 24, 3}},
		},
		BackendOrder: []string{"jobs", "archive"},
		Tools: []*Tool{
			{
				Name:        "slow_compute",
				Title:       "Slow compute",
				Description: "Computes slowly for the given number of seconds.",
				Backend:     "jobs",
				Task:        TaskRequired,
				InputSchema: json.RawMessage(`{"additionalProperties":false,"properties":{"label":{"default":"none","type":"string"},"seconds":{"minimum":0,"type":"number"}},"required":["seconds"],"type":"object"}`),
				// Set by the tool.
				PollInterval:    time.Second,
				RefreshInterval: 500 * time.Millisecond,
				TTL:             time.Hour,
				// From defaults:.
				SyncBudget:   30 * time.Second,
				MissingGrace: time.Minute,
				Annotations:  &Annotations{ReadOnly: ptr(true), OpenWorld: ptr(false)},
				Job:          slowJob,
				Pos:          Position{file, 28, 5},
			},
			{
				Name:        "delete.file",
				Description: "Deletes a file from the archive.",
				Backend:     "archive",
				Task:        TaskNever,
				InputSchema: json.RawMessage(`{"properties":{"filename":{"type":"string"}},"type":"object"}`),
				Confirm:     &Confirm{Message: "Delete {args.filename}?"},
				// From defaults:, refresh_interval following poll_interval.
				PollInterval:    2 * time.Second,
				RefreshInterval: 2 * time.Second,
				SyncBudget:      30 * time.Second,
				TTL:             12 * time.Hour,
				MissingGrace:    time.Minute,
				Annotations:     &Annotations{Destructive: ptr(true), Idempotent: ptr(true)},
				Job:             deleteJob,
				Pos:             Position{file, 65, 5},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(%s) mismatch (-want +got):\n%s", file, diff)
	}
}

func TestParseDefaults(t *testing.T) {
	src := `
version: 1
backends:
  jobs: {type: rest, base_url: "https://jobs.example.com"}
tools:
  - name: a
    description: A.
    backend: jobs
    input_schema: {type: object}
    job:
      start: {path: /jobs}
      job_id: {field: id}
      status: {path: "/jobs/{job.id}", field: status, states: {done: succeeded}}
  - name: b
    description: B.
    backend: jobs
    poll_interval: 5s
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
	type settings struct {
		Task                                         TaskMode
		Poll, Refresh, SyncBudget, TTL, MissingGrace time.Duration
	}
	tests := []struct {
		tool string
		want settings
	}{
		{"a", settings{TaskOptional, 2 * time.Second, 2 * time.Second, 50 * time.Second, 24 * time.Hour, 2 * time.Minute}},
		// refresh_interval follows the tool's own poll_interval.
		{"b", settings{TaskOptional, 5 * time.Second, 5 * time.Second, 50 * time.Second, 24 * time.Hour, 2 * time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			tool := c.Tool(tt.tool)
			if tool == nil {
				t.Fatalf("Tool(%q) = nil", tt.tool)
			}
			got := settings{tool.Task, tool.PollInterval, tool.RefreshInterval, tool.SyncBudget, tool.TTL, tool.MissingGrace}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("settings mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if c.Server.Name != "jobbridge" {
		t.Errorf("Server.Name = %q, want %q", c.Server.Name, "jobbridge")
	}
}

// TestLoadValidFixtures checks that every testdata/valid*.yaml loads: in
// particular that the schema checks accept the whole draft 2020-12
// vocabulary (valid-schema-keywords.yaml) and defaults that satisfy their
// schemas.
func TestLoadValidFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/valid*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no valid fixtures: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			if _, err := Load(file, adapterTypes...); err != nil {
				t.Errorf("Load(%s):\n%v", file, err)
			}
		})
	}
}

// TestInputSchemaKeepsDefaults checks that a tool's input schema, as the
// bridge reads it, carries each property's default, so that it can be
// applied to an omitted argument.
func TestInputSchemaKeepsDefaults(t *testing.T) {
	c, err := Load("testdata/valid-schema-keywords.yaml", adapterTypes...)
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(c.Tool("everything").InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for name, p := range schema.Properties {
		if m, isMap := p.(map[string]any); isMap && m["default"] != nil {
			d := m["default"]
			got[name] = d
		}
	}
	want := map[string]any{"port": 8080.0, "replicas": 2.0, "mode": "fast"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults mismatch (-want +got):\n%s", diff)
	}
}

// TestParseAnchors checks that YAML anchors, aliases and merge keys work, so
// that operators can share blocks between tools.
func TestParseAnchors(t *testing.T) {
	got, err := Load("testdata/valid-anchors.yaml", adapterTypes...)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want, err := Load("testdata/valid-anchors-expanded.yaml", adapterTypes...)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	// Only the content matters, not where it was written.
	ignore := func(c *Catalog) {
		c.File, c.Revision = "", ""
		for _, b := range c.Backends {
			b.Pos = Position{}
		}
		for _, t := range c.Tools {
			t.Pos = Position{}
		}
	}
	ignore(got)
	ignore(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("anchored catalog mismatch (-want +got):\n%s", diff)
	}
}

// TestParseErrors loads every testdata/*.yaml fixture not named valid* and
// compares its problems with the golden testdata/*.errors file. Run
// `go test ./catalog -run TestParseErrors -update` to rewrite them.
func TestParseErrors(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasPrefix(filepath.Base(file), "valid") {
			continue
		}
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			c, err := Load(file, adapterTypes...)
			if err == nil {
				t.Fatalf("Load(%s) = %v, want errors", file, c)
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Load(%s) error %T is not Errors: %v", file, err, err)
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".errors"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("reading golden file (run with -update to create it): %v", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("Load(%s) errors mismatch (-want +got):\n%s", file, diff)
			}
		})
	}
}

// TestManyErrorsAtOnce checks that one load reports problems from every part
// of the file, not only the first.
func TestManyErrorsAtOnce(t *testing.T) {
	_, err := Load("testdata/many-errors.yaml", adapterTypes...)
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Load error %v is not Errors", err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Path)
	}
	want := []string{
		"version",
		"server.nmae",
		"defaults.poll_interval",
		"backends.jobs.base_url",
		"backends.Other",
		"backends.other.type",
		"tools[0].name",
		"tools[0].backend",
		"tools[1].input_schema.type",
		"tools[1].ttl",
		"tools[1].job.status.states.RUNNING",
		"tools[2].name",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("error paths mismatch (-want +got):\n%s", diff)
	}
}

// TestErrorsHideHeaderValues checks that problems in backend headers, which
// hold credentials, never quote their values.
func TestErrorsHideHeaderValues(t *testing.T) {
	const secret = "s3cret-T0KEN"
	tests := []struct {
		name, headers string
	}{
		{"bad env reference", `{Authorization: "Bearer ` + secret + ` ${1BAD}"}`},
		{"line break", `{Authorization: "Bearer ` + secret + `\nX: y"}`},
		{"bad header name", `{"Bad Name": "` + secret + `"}`},
		{"wrong kind", `{Authorization: [` + secret + `]}`},
		{"unknown tag", `{Authorization: !secret ` + secret + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "version: 1\nbackends:\n  jobs:\n    type: rest\n    base_url: https://jobs.example.com\n    headers: " + tt.headers + "\n"
			_, err := Parse("secret.yaml", []byte(src), adapterTypes...)
			if err == nil {
				t.Fatal("Parse succeeded, want errors")
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("errors quote a header value:\n%v", err)
			}
			if !strings.Contains(err.Error(), "backends.jobs.headers") {
				t.Errorf("errors do not point at the headers:\n%v", err)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "absent.yaml"), adapterTypes...)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(absent) error = %v, want one wrapping os.ErrNotExist", err)
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"path", &Error{Pos: Position{"c.yaml", 3, 5}, Path: "tools[0].name", Err: errors.New("required")}, "c.yaml:3:5: tools[0].name: required"},
		{"no path", &Error{Pos: Position{"c.yaml", 1, 1}, Err: errors.New("the catalog is empty")}, "c.yaml:1:1: the catalog is empty"},
		{"no column", &Error{Pos: Position{"c.yaml", 7, 0}, Err: errors.New("invalid YAML: x")}, "c.yaml:7: invalid YAML: x"},
		{"no line", &Error{Pos: Position{"c.yaml", 0, 0}, Err: errors.New("invalid YAML: x")}, "c.yaml: invalid YAML: x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
	errs := Errors{tests[0].err, tests[1].err}
	if got, want := errs.Error(), tests[0].want+"\n"+tests[1].want; got != want {
		t.Errorf("Errors.Error() = %q, want %q", got, want)
	}
}

func TestConfirmMessage(t *testing.T) {
	tests := []struct {
		name    string
		message string
		args    map[string]any
		want    string
	}{
		{"string verbatim", "Delete {args.filename}?", map[string]any{"filename": "a \"b\".txt"}, `Delete a "b".txt?`},
		{"number", "Scale to {args.n} replicas", map[string]any{"n": 3.0}, "Scale to 3 replicas"},
		{"object compact", "Apply {args.patch}", map[string]any{"patch": map[string]any{"a": []any{1, true}}}, `Apply {"a":[1,true]}`},
		{"null", "Set {args.v}", map[string]any{"v": nil}, "Set null"},
		{"missing renders empty", "Delete {args.filename}?", map[string]any{}, "Delete ?"},
		{"repeated", "{args.a}-{args.a}", map[string]any{"a": "x"}, "x-x"},
		{"other braces kept", "{job.id} {not a placeholder} {args.a}", map[string]any{"a": "x"}, "{job.id} {not a placeholder} x"},
		{"unterminated", "Delete {args.a", map[string]any{"a": "x"}, "Delete {args.a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := &Tool{Confirm: &Confirm{Message: tt.message}}
			if got := tool.ConfirmMessage(tt.args); got != tt.want {
				t.Errorf("ConfirmMessage(%v) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
	if got := (&Tool{}).ConfirmMessage(map[string]any{"a": 1}); got != "" {
		t.Errorf("ConfirmMessage without confirm = %q, want empty", got)
	}
}

func TestEnvRefs(t *testing.T) {
	c, err := Load("testdata/valid.yaml", adapterTypes...)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"JOBS_TOKEN", "TEAM"}
	if diff := cmp.Diff(want, c.EnvRefs()); diff != "" {
		t.Errorf("EnvRefs() mismatch (-want +got):\n%s", diff)
	}
}

func TestSuggest(t *testing.T) {
	fields := []field{{name: "description"}, {name: "backend"}, {name: "title"}}
	tests := []struct {
		in, want string
	}{
		{"descripton", "description"},
		{"Backend", "backend"},
		{"titel", "title"},
		{"colour", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := suggest(tt.in, fields); got != tt.want {
				t.Errorf("suggest(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzParse checks that no input makes Parse panic, and that it returns
// either a catalog or a non-empty Errors with positions in the named file.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data, adapterTypes...)
		if err == nil {
			if c == nil {
				t.Fatal("Parse returned neither a catalog nor an error")
			}
			return
		}
		var errs Errors
		if !errors.As(err, &errs) || len(errs) == 0 {
			t.Fatalf("Parse error is not a non-empty Errors: %v", err)
		}
		for _, e := range errs {
			if e.Pos.File != "fuzz.yaml" || e.Err == nil {
				t.Fatalf("malformed error %#v", e)
			}
		}
	})
}

func TestPolicyAllows(t *testing.T) {
	tests := []struct {
		name      string
		policy    *Policy
		principal string
		groups    []string
		scopes    []string
		want      bool
	}{
		{"no policy", nil, "p", nil, nil, true},
		{"empty policy", &Policy{}, "p", nil, nil, true},
		{"listed principal", &Policy{Principals: []string{"p"}}, "p", nil, nil, true},
		{"other principal", &Policy{Principals: []string{"q"}}, "p", nil, nil, false},
		{"member of a group", &Policy{Groups: []string{"ops"}}, "p", []string{"dev", "ops"}, nil, true},
		{"not a member", &Policy{Groups: []string{"ops"}}, "p", []string{"dev"}, nil, false},
		{"principal or group", &Policy{Principals: []string{"q"}, Groups: []string{"ops"}}, "p", []string{"ops"}, nil, true},
		{"all scopes held", &Policy{Scopes: []string{"a", "b"}}, "p", nil, []string{"b", "a", "c"}, true},
		{"a scope missing", &Policy{Scopes: []string{"a", "b"}}, "p", nil, []string{"a"}, false},
		{"member without the scope", &Policy{Groups: []string{"ops"}, Scopes: []string{"a"}}, "p", []string{"ops"}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.policy.Allows(tc.principal, tc.groups, tc.scopes); got != tc.want {
				t.Errorf("Allows = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLimitsValidate(t *testing.T) {
	var l Limits
	l.SetDefaults()
	if err := l.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	l.MaxLiveTasks = -1
	l.MaxInputWait = time.Second
	err := l.Validate()
	if err == nil || !strings.Contains(err.Error(), "max_live_tasks") || !strings.Contains(err.Error(), "max_input_wait") {
		t.Errorf("Validate = %v, want errors for max_live_tasks and max_input_wait", err)
	}
}
