package main

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/internal/fielderr"
)

// doubtfulBackend and doubtfulJob make a backend type whose job blocks warn
// about a "?" in their note, at its byte.
type doubtfulBackend struct{}

func (*doubtfulBackend) SetDefaults()    {}
func (*doubtfulBackend) Validate() error { return nil }

type doubtfulJob struct {
	Note string `yaml:"note"`
}

func (*doubtfulJob) SetDefaults()       {}
func (*doubtfulJob) Validate() error    { return nil }
func (*doubtfulJob) ArgNames() []string { return nil }

func (j *doubtfulJob) Warnings() error {
	if i := strings.IndexByte(j.Note, '?'); i >= 0 {
		return fielderr.New("note", i+1, errors.New("is this a question?"))
	}
	return nil
}

var doubtfulType = catalog.BackendType{
	Name:      "doubtful",
	NewConfig: func() catalog.Block { return new(doubtfulBackend) },
	NewJob:    func() catalog.JobBlock { return new(doubtfulJob) },
}

// TestValidateReportsWarnings checks that validate prints a catalog's
// warnings with their positions and still succeeds.
func TestValidateReportsWarnings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doubtful.yaml")
	src := `version: 1
backends:
  d: {type: doubtful}
tools:
  - name: t
    description: T.
    backend: d
    input_schema: {type: object}
    job:
      note: "done?"
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := validate([]string{path}, []catalog.BackendType{doubtfulType}, &stdout, &stderr); err != nil {
		t.Fatalf("validate = %v, want success with warnings\n%s", err, stderr.String())
	}
	want := "warning: " + path + ":10:18: tools[0].job.note: is this a question?\n"
	if got := stderr.String(); got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
	if !strings.HasPrefix(stdout.String(), path+": ok (1 backends, 1 tools") {
		t.Errorf("stdout = %q, want an ok line", stdout.String())
	}
}

// TestShippedCatalogsBuildAdapters checks that every shipped catalog, with
// its backends pointed at the demo's fakes as `jobbridge demo --config`
// does, builds one adapter per backend from the table of backend kinds.
func TestShippedCatalogsBuildAdapters(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no catalogs in configs/: %v", err)
	}
	fakes := demoFakes{jobAPI: "http://127.0.0.1:1", batch: "http://127.0.0.1:2", github: "http://127.0.0.1:3"}
	types := map[string]bool{}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			cat, err := catalog.Load(file, catalogTypes()...)
			if err != nil {
				t.Fatal(err)
			}
			for _, be := range cat.Backends {
				kind, ok := kindOf(be.Type)
				if !ok {
					t.Fatalf("backend %q: no kind for type %q", be.Name, be.Type)
				}
				kind.useFakes(be.Config, fakes)
				types[be.Type] = true
			}
			set, err := buildAdapters(cat, adapterOptions{
				getenv:         func(name string) (string, bool) { return "demo-" + name, true },
				logger:         slog.New(slog.DiscardHandler),
				awsCredentials: credentials.NewStaticCredentialsProvider("demo", "demo", ""),
			})
			if err != nil {
				t.Fatalf("buildAdapters: %v", err)
			}
			if len(set) != len(cat.Backends) {
				t.Errorf("built %d adapters for %d backends", len(set), len(cat.Backends))
			}
		})
	}
	for _, k := range backendKinds {
		if !types[k.Name] {
			t.Errorf("no shipped catalog uses backend type %q", k.Name)
		}
	}
}

// TestServeLogsWarnings checks that serve logs each catalog warning at WARN
// when it starts.
func TestServeLogsWarnings(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "doubtful.yaml")
	src := "version: 1\nbackends:\n  d: {type: doubtful}\ntools:\n  - {name: t, description: T., backend: d, input_schema: {type: object}, job: {note: \"sure?\"}}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Load(path, doubtfulType)
	if err != nil {
		t.Fatal(err)
	}
	// serve builds adapters from its own table, which has no doubtful
	// type: it logs the warnings before it fails there.
	var stderr syncBuffer
	err = serve(t.Context(), serveConfig{
		catalog:  cat,
		listen:   "127.0.0.1:0",
		store:    "sqlite:" + filepath.Join(dir, "tasks.db"),
		logLevel: slog.LevelInfo,
	}, func(string) (string, bool) { return "", false }, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), `unknown type "doubtful"`) {
		t.Fatalf("serve = %v, want the unknown type refused", err)
	}
	want := `level=WARN msg="catalog warning" at=` + path + `:5:91 path=tools[0].job.note warning="is this a question?"`
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("log does not contain %q:\n%s", want, stderr.String())
	}
}

// TestValidateWarnsAboutUnquotedScriptArguments: an argument interpolated
// unquoted into a script body is allowed but warned about, at the
// placeholder, with the quoting to use; a quoted one is not.
func TestValidateWarnsAboutUnquotedScriptArguments(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script.yaml")
	src := `version: 1
backends:
  hpc: {type: rest, base_url: "https://hpc.example.com/api"}
tools:
  - name: run
    description: Runs a script.
    backend: hpc
    input_schema: {type: object, properties: {branch: {type: string}, msg: {type: string}}}
    job:
      start:
        path: /jobs
        body:
          script: "#!/bin/bash\necho {= shell_quote(args.msg)} && git checkout {args.branch}"
      job_id: {field: id}
      status: {path: "/jobs/{job.id}", field: state, states: {DONE: succeeded}}
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := validate([]string{path}, catalogTypes(), &stdout, &stderr); err != nil {
		t.Fatalf("validate = %v, want success with a warning\n%s", err, stderr.String())
	}
	got := stderr.String()
	want := "warning: " + path + ":13:80: tools[0].job.start.body.script: argument branch is interpolated unquoted into a script"
	if !strings.Contains(got, want) || !strings.Contains(got, "{= shell_quote(args.branch)}") {
		t.Errorf("stderr = %q, want %q and the quoting to use", got, want)
	}
	if strings.Contains(got, "argument msg") {
		t.Errorf("stderr = %q: the quoted argument is warned about", got)
	}
}

// TestValidateWarnsAboutMissingSecrets: a ${NAME} that is unset here and a
// ${file:PATH} that does not exist here are warned about (serve would
// refuse to start), without failing the catalog; a file that exists is not.
func TestValidateWarnsAboutMissingSecrets(t *testing.T) {
	dir := t.TempDir()
	present := filepath.Join(dir, "present-token")
	if err := os.WriteFile(present, []byte("s3cret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing-token")
	path := filepath.Join(dir, "secrets.yaml")
	src := `version: 1
backends:
  hpc:
    type: rest
    base_url: "https://hpc.example.com/api"
    headers:
      X-API-Token: "${file:` + missing + `}"
      X-Other: "${file:` + present + `}"
      X-Team: "${VALIDATE_TEST_UNSET_VAR}"
tools:
  - name: run
    description: Runs a job.
    backend: hpc
    input_schema: {type: object}
    job:
      start: {path: /jobs}
      job_id: {field: id}
      status: {path: "/jobs/{job.id}", field: state, states: {DONE: succeeded}}
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := validate([]string{path}, catalogTypes(), &stdout, &stderr); err != nil {
		t.Fatalf("validate = %v, want success with warnings\n%s", err, stderr.String())
	}
	got := stderr.String()
	for _, want := range []string{
		path + ": warning: environment variable VALIDATE_TEST_UNSET_VAR is not set here; serve will need it\n",
		path + ": warning: secret file " + missing + " cannot be read here (no such file or directory); serve will need it\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("stderr lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, present) {
		t.Errorf("stderr warns about the secret file that exists:\n%s", got)
	}
}
