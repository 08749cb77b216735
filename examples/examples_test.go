// Package examples_test runs each example catalog in examples/ against its
// scripted fake (examples/NAME/fake.yaml): the catalog is loaded through the
// catalog package, as `jobbridge validate` and `jobbridge serve` load it,
// its backend is pointed at the fake, and the real REST adapter starts,
// polls, cancels and finds jobs, as a user's agent would through the bridge.
package examples_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/rest"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/internal/fakes/scripted"
)

// restType is the catalog's view of the REST backend type, as the binary's
// table of backend types (cmd/jobbridge) declares it.
var restType = catalog.BackendType{
	Name:      "rest",
	NewConfig: func() catalog.Block { return new(rest.BackendConfig) },
	NewJob:    func() catalog.JobBlock { return new(rest.JobConfig) },
}

// example is one directory of examples/ and the scenarios run against it.
type example struct {
	dir string
	// host is the documented base URL in the catalog, replaced by the
	// fake's address wherever it appears (base_url, token_url).
	host string
	// env are the environment variables the catalog's secrets name.
	env map[string]string
	// files are ${file:} paths, replaced by temporary files with this
	// content.
	files     map[string]string
	scenarios []scenario
}

type scenario struct {
	name string
	run  func(t *testing.T, e *env)
}

// env is one scenario's fake and adapter.
type env struct {
	fake    *scripted.Fake
	adapter adapters.Adapter
	// cat is the catalog pointed at the fake; name is its backend's.
	cat     *catalog.Catalog
	backend string
	base    string
	tool    string
	// files maps the catalog's ${file:} paths to the temporary files.
	files map[string]string
}

func TestExamples(t *testing.T) {
	for _, ex := range examples {
		t.Run(ex.dir, func(t *testing.T) {
			for _, sc := range ex.scenarios {
				t.Run(sc.name, func(t *testing.T) {
					sc.run(t, setUp(t, ex))
				})
			}
		})
	}
}

// Every directory of examples/ is tested.
func TestEveryExampleIsTested(t *testing.T) {
	dirs, err := filepath.Glob("*/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tested := map[string]bool{}
	for _, ex := range examples {
		tested[ex.dir] = true
	}
	for _, d := range dirs {
		if !tested[filepath.Dir(d)] {
			t.Errorf("%s has no scenarios in examples_test.go", d)
		}
	}
	if len(dirs) < 6 {
		t.Errorf("%d example catalogs, want at least 6", len(dirs))
	}
}

var baseURLLine = regexp.MustCompile(`(?m)^(\s*)base_url:.*$`)

// setUp validates the example's catalog as written, starts its fake and
// builds the REST adapter from the catalog with the backend pointed at the
// fake.
func setUp(t *testing.T, ex example) *env {
	t.Helper()
	path := filepath.Join(ex.dir, "catalog.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// As written: what `jobbridge validate` checks.
	cat, err := catalog.Parse(path, data, restType)
	if err != nil {
		t.Fatalf("the catalog as written does not load:\n%v", err)
	}
	if len(cat.Warnings) > 0 {
		t.Errorf("the catalog as written has warnings:\n%v", cat.Warnings)
	}

	script, err := scripted.Load(filepath.Join(ex.dir, "fake.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fake := scripted.New(script)
	base, err := fake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })

	// Pointed at the fake: the documented host replaced, loopback allowed,
	// secret files in a temporary directory.
	text := strings.ReplaceAll(string(data), ex.host, base)
	text = baseURLLine.ReplaceAllString(text, "${1}base_url: "+base+"\n${1}allow_networks: [127.0.0.0/8]")
	e := &env{fake: fake, base: base, files: map[string]string{}}
	dir := t.TempDir()
	for p, content := range ex.files {
		tmp := filepath.Join(dir, filepath.Base(p))
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		text = strings.ReplaceAll(text, p, tmp)
		e.files[p] = tmp
	}
	cat, err = catalog.Parse(path, []byte(text), restType)
	if err != nil {
		t.Fatalf("the catalog pointed at the fake does not load:\n%v", err)
	}
	if len(cat.BackendOrder) != 1 {
		t.Fatalf("the example has %d backends, want 1", len(cat.BackendOrder))
	}
	name := cat.BackendOrder[0]
	jobs := map[string]rest.JobConfig{}
	for _, tool := range cat.Tools {
		jobs[tool.Name] = *tool.Job.(*rest.JobConfig)
		e.tool = tool.Name
	}
	a, err := rest.New(name, *cat.Backends[name].Config.(*rest.BackendConfig), jobs, &rest.Options{
		Getenv: func(k string) (string, bool) { v, ok := ex.env[k]; return v, ok },
	})
	if err != nil {
		t.Fatalf("rest.New: %v", err)
	}
	e.adapter, e.cat, e.backend = a, cat, name
	return e
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func (e *env) request(correlation string, args map[string]any) adapters.StartRequest {
	return adapters.StartRequest{Tool: e.tool, Arguments: args, CorrelationID: correlation, SubmittedAt: time.Now().Add(-time.Hour)}
}

func (e *env) start(t *testing.T, args map[string]any) adapters.JobRef {
	t.Helper()
	ref, err := e.adapter.Start(ctx(t), e.request("corr-1", args))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return ref
}

// poll observes the job once. When the observation replaces the job's
// reference (a queue item became a build), *ref is replaced, as the bridge
// replaces the stored one.
func (e *env) poll(t *testing.T, ref *adapters.JobRef) adapters.Observation {
	t.Helper()
	obs, err := e.adapter.Poll(ctx(t), []adapters.JobRef{*ref})
	if err != nil {
		t.Fatalf("Poll: %v", err)
	}
	if len(obs) != 1 {
		t.Fatalf("Poll returned %d observations, want 1", len(obs))
	}
	if obs[0].Ref != nil {
		*ref = *obs[0].Ref
	}
	return obs[0]
}

// run polls the job until it reaches a final state (at most 12 polls; each
// of the fake's status answers moves the job on) and returns every
// observation.
func (e *env) run(t *testing.T, ref *adapters.JobRef) []adapters.Observation {
	t.Helper()
	var all []adapters.Observation
	for range 12 {
		o := e.poll(t, ref)
		if o.Err != nil {
			t.Fatalf("observation %d: %v", len(all), o.Err)
		}
		all = append(all, o)
		if o.State.Terminal() {
			return all
		}
	}
	t.Fatalf("the job did not finish in %d polls; last: %+v", len(all), all[len(all)-1])
	return nil
}

// pollPast polls n times, so that the fake moves the job on n steps.
func (e *env) pollPast(t *testing.T, ref *adapters.JobRef, n int) adapters.Observation {
	t.Helper()
	var o adapters.Observation
	for range n {
		if o = e.poll(t, ref); o.Err != nil {
			t.Fatalf("Poll: %v", o.Err)
		}
	}
	return o
}

// requests returns the fake's records of the named route.
func (e *env) requests(route string) []scripted.Request {
	var out []scripted.Request
	for _, r := range e.fake.Requests() {
		if r.Route == route {
			out = append(out, r)
		}
	}
	return out
}

func (e *env) only(t *testing.T, route string) scripted.Request {
	t.Helper()
	rs := e.requests(route)
	if len(rs) != 1 {
		t.Fatalf("the fake received %d %s requests, want 1; all: %+v", len(rs), route, e.fake.Requests())
	}
	return rs[0]
}

// last returns the final observation and checks its state.
func last(t *testing.T, obs []adapters.Observation, want adapters.State) adapters.Observation {
	t.Helper()
	o := obs[len(obs)-1]
	if o.State != want {
		t.Fatalf("final state %v (message %q), want %v", o.State, o.Message, want)
	}
	return o
}

// words is everything an observation tells the caller in text.
func words(o adapters.Observation) string {
	s := o.Message
	if o.Result != nil {
		s += " | " + o.Result.Text
	}
	if o.Error != nil {
		s += " | " + o.Error.Message
	}
	if o.Err != nil {
		s += " | " + o.Err.Error()
	}
	return s
}

func wantEqual[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

func wantContains(t *testing.T, what, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Errorf("%s = %q, want it to contain %q", what, got, want)
	}
}

// body decodes a recorded JSON request body.
func body(t *testing.T, r scripted.Request) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.Body), &m); err != nil {
		t.Fatalf("%s %s: body %q is not a JSON object: %v", r.Method, r.Path, r.Body, err)
	}
	return m
}

// at walks a decoded JSON value along keys and list indexes.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// runNew starts a job with args and runs it to its end.
func (e *env) runNew(t *testing.T, args map[string]any) []adapters.Observation {
	t.Helper()
	ref := e.start(t, args)
	return e.run(t, &ref)
}

// pollOther observes the job of the same tool with another ID (one the
// backend does not know).
func (e *env) pollOther(t *testing.T, ref adapters.JobRef, id string) adapters.Observation {
	t.Helper()
	ref.ID = id
	return e.poll(t, &ref)
}

// find looks the job up as the bridge does after an unknown outcome: with
// the call's arguments and correlation ID, an hour after the submission.
func (e *env) find(t *testing.T, correlation string, args map[string]any) (adapters.JobRef, bool) {
	t.Helper()
	f, ok := e.adapter.(adapters.Finder)
	if !ok {
		t.Fatal("the adapter is not a Finder")
	}
	ref, found, err := f.Find(ctx(t), e.request(correlation, args))
	if err != nil {
		t.Fatalf("Find(%s): %v", correlation, err)
	}
	return ref, found
}

// refusal checks that a start was refused (certainly no job) with the
// backend's words.
func refusal(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatal("Start succeeded, want a refusal")
	case errors.Is(err, adapters.ErrOutcomeUnknown), errors.Is(err, adapters.ErrThrottled), errors.Is(err, adapters.ErrJobUnaddressable):
		t.Fatalf("Start: %v; want a refusal (certainly no job)", err)
	}
	wantContains(t, "the refusal", err.Error(), want)
}

func notFound(t *testing.T, o adapters.Observation, want string) {
	t.Helper()
	if !errors.Is(o.Err, adapters.ErrJobNotFound) {
		t.Fatalf("observation %+v, want an error wrapping ErrJobNotFound", o)
	}
	wantContains(t, "the not-found error", o.Err.Error(), want)
}

// neverStarted checks that the backend will never start the job (a queued
// request cancelled or dropped): the observation's Err wraps
// adapters.ErrNeverStarted in a CallError whose text starts with want (the
// call and the backend's words), and says no state, so that the task ends
// cancelled when it asked to cancel, else completed with isError, never
// failed.
func neverStarted(t *testing.T, o adapters.Observation, want string) {
	t.Helper()
	var ce *adapters.CallError
	if !errors.Is(o.Err, adapters.ErrNeverStarted) || !errors.As(o.Err, &ce) {
		t.Fatalf("observation %v %q, want an Err wrapping ErrNeverStarted in a CallError", o.State, words(o))
	}
	if o.State != 0 || o.Error != nil {
		t.Errorf("observation %v %+v besides Err, want none", o.State, o.Error)
	}
	if !strings.HasPrefix(o.Err.Error(), want) {
		t.Errorf("Err = %q, want it to start with %q", o.Err.Error(), want)
	}
}

func finishedAt(t *testing.T, o adapters.Observation, want string) {
	t.Helper()
	w, err := time.Parse(time.RFC3339, want)
	if err != nil {
		t.Fatal(err)
	}
	if !o.FinishedAt.Equal(w) {
		t.Errorf("FinishedAt = %v, want %v", o.FinishedAt, w)
	}
}
