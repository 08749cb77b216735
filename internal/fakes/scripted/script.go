package scripted

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Script is a fake's YAML script (see the package documentation).
type Script struct {
	// Name names the fake in errors.
	Name string `yaml:"name"`
	// Auth, when set, answers every request of a route that is not public
	// and does not carry an accepted credential with Auth.Reject.
	Auth *Auth `yaml:"auth"`
	// SecretHeaders name request headers whose values the records redact
	// (Authorization is always redacted to its scheme).
	SecretHeaders []string             `yaml:"secret_headers"`
	Lifecycles    map[string]Lifecycle `yaml:"lifecycles"`
	Routes        []Route              `yaml:"routes"`
	Faults        []Fault              `yaml:"faults"`
	// Anchors holds YAML anchors that routes share (a resource's shape);
	// the fake does not read it.
	Anchors any `yaml:"anchors"`
}

// Auth is the credential check.
type Auth struct {
	// Header is the request header checked. Default Authorization.
	Header string `yaml:"header"`
	// Accept lists the values accepted (see [Fake.SetAccepted]).
	Accept []string `yaml:"accept"`
	// Reject is the answer otherwise. Default 401 with {"message": "unauthorized"}.
	Reject *Response `yaml:"reject"`
}

// Lifecycle is the scripted course of a job.
type Lifecycle struct {
	// Every is how many advancing answers a phase lasts. Default 1.
	Every  int     `yaml:"every"`
	Phases []Phase `yaml:"phases"`
	// Cancel names the phase a cancel moves an unfinished job to.
	Cancel string `yaml:"cancel"`
}

// Phase is one step of a lifecycle.
type Phase struct {
	Name string `yaml:"name"`
	// Fields are shown as {job.NAME}, over those of the phases before;
	// string leaves are templates over the job.
	Fields map[string]any `yaml:"fields"`
}

// Route is one kind of request the fake answers.
type Route struct {
	// Name names the route in faults and records. Default "METHOD PATH".
	Name   string `yaml:"name"`
	Method string `yaml:"method"`
	// Path is a pattern: literal segments and {VAR} segments, each matching
	// one non-empty segment.
	Path  string `yaml:"path"`
	Match Match  `yaml:"match"`
	// Public routes are not subject to Auth (a token endpoint).
	Public bool `yaml:"public"`
	// Create makes the route create a job before answering.
	Create *Create `yaml:"create"`
	// Job is a template naming the job the route is about; JobBy names the
	// var compared with it (default the job's ID).
	Job   string `yaml:"job"`
	JobBy string `yaml:"job_by"`
	// IfJob makes the route match only when Job names a job; otherwise
	// the later routes are tried (a "409 exists already" route).
	IfJob bool `yaml:"if_job"`
	// Missing answers when Job names no job. Default 404 {"message": "not found"}.
	Missing *Response `yaml:"missing"`
	Advance bool      `yaml:"advance"`
	Cancel  bool      `yaml:"cancel"`
	Delete  bool      `yaml:"delete"`
	List    *List     `yaml:"list"`
	Respond Response  `yaml:"respond"`
}

// Match narrows a route: every entry must hold.
type Match struct {
	Query   map[string]string `yaml:"query"`
	Headers map[string]string `yaml:"headers"`
	// Body maps gjson paths into the JSON request body to the text of the
	// value there.
	Body map[string]string `yaml:"body"`
	// Form maps form fields (application/x-www-form-urlencoded) to values.
	Form map[string]string `yaml:"form"`
	// BodyContains lists texts the raw request body must contain.
	BodyContains []string `yaml:"body_contains"`
}

// Create says how a route creates a job.
type Create struct {
	// ID is a template; default "{job.seq}".
	ID        string            `yaml:"id"`
	Lifecycle string            `yaml:"lifecycle"`
	Vars      map[string]string `yaml:"vars"`
}

// List makes a route answer about many jobs: {items} in its body.
type List struct {
	Where map[string]string `yaml:"where"`
	Item  any               `yaml:"item"`
}

// Response is an answer. Status defaults to 200; a body is sent as JSON.
type Response struct {
	Status  int               `yaml:"status"`
	Headers map[string]string `yaml:"headers"`
	Body    any               `yaml:"body"`
}

// Fault replaces the at-th answer (from 1) of the route named Route.
type Fault struct {
	Route    string `yaml:"route"`
	At       int    `yaml:"at"`
	Response `yaml:",inline"`
}

// Load reads and checks the script at path.
func Load(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading fake script: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse decodes a script, rejecting unknown keys, and checks it.
func Parse(data []byte) (*Script, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("decoding fake script: %w", err)
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	return &s, nil
}

// check fills defaults and reports every problem, joined.
func (s *Script) check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.Auth != nil && s.Auth.Header == "" {
		s.Auth.Header = "Authorization"
	}
	for name, lc := range s.Lifecycles {
		if len(lc.Phases) == 0 {
			bad("lifecycle %s: no phases", name)
		}
		if lc.Every < 0 {
			bad("lifecycle %s: every must not be negative", name)
		}
		if lc.Every == 0 {
			lc.Every = 1
		}
		if lc.Cancel != "" && lc.phase(lc.Cancel) < 0 {
			bad("lifecycle %s: cancel phase %q is not among its phases", name, lc.Cancel)
		}
		if lc.Cancel != "" && len(lc.Phases) < 2 {
			bad("lifecycle %s: a cancel phase needs another phase", name)
		}
		s.Lifecycles[name] = lc
	}
	names := map[string]bool{}
	for i := range s.Routes {
		r := &s.Routes[i]
		r.Method = strings.ToUpper(r.Method)
		if r.Method == "" {
			r.Method = http.MethodGet
		}
		if r.Name == "" {
			r.Name = r.Method + " " + r.Path
		}
		if names[r.Name] {
			bad("route %s: name given twice", r.Name)
		}
		names[r.Name] = true
		if !strings.HasPrefix(r.Path, "/") {
			bad("route %s: path must start with /", r.Name)
		}
		if r.Create != nil {
			if _, ok := s.Lifecycles[r.Create.Lifecycle]; !ok {
				bad("route %s: create names lifecycle %q, which the script lacks", r.Name, r.Create.Lifecycle)
			}
			if r.Create.ID == "" {
				r.Create.ID = "{job.seq}"
			}
			if r.Job != "" {
				bad("route %s: set only one of create and job", r.Name)
			}
		}
		if (r.Advance || r.Cancel || r.Delete || r.IfJob) && r.Job == "" {
			bad("route %s: advance, cancel, delete and if_job need job", r.Name)
		}
		if r.List != nil && (r.Job != "" || r.Create != nil) {
			bad("route %s: a list route is about no one job", r.Name)
		}
	}
	for i, f := range s.Faults {
		if !names[f.Route] {
			bad("faults[%d]: no route named %q", i, f.Route)
		}
		if f.At < 1 {
			bad("faults[%d]: at counts from 1", i)
		}
	}
	return errors.Join(errs...)
}

// phase returns the index of the phase called name, or -1.
func (lc Lifecycle) phase(name string) int {
	return slices.IndexFunc(lc.Phases, func(p Phase) bool { return p.Name == name })
}

// course returns the indexes of the phases a job advances through: all but
// the cancel phase, in order.
func (lc Lifecycle) course() []int {
	var out []int
	for i, p := range lc.Phases {
		if lc.Cancel == "" || p.Name != lc.Cancel {
			out = append(out, i)
		}
	}
	return out
}
