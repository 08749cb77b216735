package scripted

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/jobbridge/jobbridge/internal/fakes/exchanges"
	"github.com/jobbridge/jobbridge/internal/fakes/loopback"
)

// Request is one request the fake received.
type Request struct {
	// Route is the name of the route that answered; empty when none did
	// (answered 404).
	Route  string
	Method string
	Path   string
	Query  url.Values
	// Header is redacted: Authorization keeps its scheme only, the
	// script's secret headers read "[redacted]".
	Header http.Header
	Body   string
	// Status is the status answered.
	Status int
}

// Fake serves a script. It is an [http.Handler], safe for concurrent use.
type Fake struct {
	script *Script
	srv    loopback.Server

	mu       sync.Mutex
	seq      int
	jobs     []*job // in creation order
	accepted []string
	faults   []Fault
	hits     map[string]int // answers per route
	reqs     []Request
}

type job struct {
	id        string
	seq       int
	lifecycle Lifecycle
	vars      map[string]any
	answers   int // advancing answers so far
	cancelled bool
}

// New returns a fake serving s (a script from [Load] or [Parse]).
func New(s *Script) *Fake {
	f := &Fake{script: s, faults: slices.Clone(s.Faults), hits: map[string]int{}}
	if s.Auth != nil {
		f.accepted = slices.Clone(s.Auth.Accept)
	}
	return f
}

// Start serves the fake on a loopback port and returns its base URL
// (http://127.0.0.1:PORT).
func (f *Fake) Start() (string, error) {
	addr, err := f.srv.Start(f.name(), "", f)
	if err != nil {
		return "", err
	}
	return "http://" + addr, nil
}

// Close stops serving.
func (f *Fake) Close() error { return f.srv.Close(f.name()) }

func (f *Fake) name() string { return "scripted fake " + f.script.Name }

// SetAccepted replaces the credentials accepted from now on (a rotated
// token).
func (f *Fake) SetAccepted(values ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.accepted = slices.Clone(values)
}

// Inject adds a fault: the at-th answer (from 1, counting every answer
// the route gave so far) of the named route is fault's response instead.
func (f *Fake) Inject(fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, fault)
}

// Requests returns the requests received so far, in order.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// Phase returns the name of the job's current phase; ok is false when no
// job has the ID.
func (f *Fake) Phase(id string) (phase string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range f.jobs {
		if j.id == id {
			return j.lifecycle.Phases[j.current()].Name, true
		}
	}
	return "", false
}

// reached returns the indexes of the phases the job has gone through, the
// current one last.
func (j *job) reached() []int {
	course := j.lifecycle.course()
	out := course[:min(j.answers/j.lifecycle.Every, len(course)-1)+1]
	if j.cancelled {
		out = append(slices.Clip(out), j.lifecycle.phase(j.lifecycle.Cancel))
	}
	return out
}

// current is the index of the job's phase.
func (j *job) current() int {
	r := j.reached()
	return r[len(r)-1]
}

// finished reports whether the job is in its final phase (or cancelled).
func (j *job) finished() bool {
	course := j.lifecycle.course()
	return j.cancelled || j.current() == course[len(course)-1]
}

// view is what {job.NAME} sees: ID, sequence number, phase, vars and the
// fields of the phases reached, later ones over earlier ones.
func (j *job) view() map[string]any {
	base := map[string]any{"id": j.id, "seq": j.seq}
	maps.Copy(base, j.vars)
	m := maps.Clone(base)
	own := &vars{job: base}
	for _, i := range j.reached() {
		for k, v := range j.lifecycle.Phases[i].Fields {
			m[k] = own.value(v)
		}
	}
	m["phase"] = j.lifecycle.Phases[j.current()].Name
	return m
}

// ServeHTTP answers one request as the script says.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	v := &vars{query: r.URL.Query(), head: r.Header, body: body, form: url.Values{}}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		v.form, _ = url.ParseQuery(string(body))
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	route, resp := f.answer(r, v)
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	f.reqs = append(f.reqs, Request{
		Route: route, Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(),
		Header: f.redact(r.Header), Body: string(body), Status: status,
	})

	for k, t := range resp.Headers {
		w.Header().Set(k, v.text(t))
	}
	var out []byte
	if resp.Body != nil {
		out, _ = json.Marshal(v.value(resp.Body))
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// answer picks the route and its response, and applies the route's
// effects; f.mu is held. v gains the route's path vars, job and items.
func (f *Fake) answer(r *http.Request, v *vars) (string, Response) {
	var route *Route
	for i := range f.script.Routes {
		rt := &f.script.Routes[i]
		pv, ok := matchPath(rt.Path, r.URL.Path)
		if !ok || rt.Method != r.Method {
			continue
		}
		v.path = pv
		if rt.Match.holds(v) && (!rt.IfJob || f.find(rt, v) >= 0) {
			route = rt
			break
		}
	}
	if route == nil {
		return "", Response{Status: http.StatusNotFound, Body: map[string]any{"message": "no route for " + r.Method + " " + r.URL.Path}}
	}
	if a := f.script.Auth; a != nil && !route.Public && !slices.Contains(f.accepted, r.Header.Get(a.Header)) {
		if a.Reject != nil {
			return route.Name, *a.Reject
		}
		return route.Name, Response{Status: http.StatusUnauthorized, Body: map[string]any{"message": "unauthorized"}}
	}
	f.hits[route.Name]++
	for _, fault := range f.faults {
		if fault.Route == route.Name && fault.At == f.hits[route.Name] {
			return route.Name, fault.Response
		}
	}

	switch {
	case route.Create != nil:
		f.seq++
		j := &job{seq: f.seq, lifecycle: f.script.Lifecycles[route.Create.Lifecycle], vars: map[string]any{}}
		v.job = map[string]any{"seq": j.seq}
		j.id = v.text(route.Create.ID)
		v.job["id"] = j.id
		for k, t := range route.Create.Vars {
			j.vars[k] = v.value(t)
		}
		f.jobs = append(f.jobs, j)
		v.job = j.view()
	case route.Job != "":
		i := f.find(route, v)
		if i < 0 {
			if route.Missing != nil {
				return route.Name, *route.Missing
			}
			return route.Name, Response{Status: http.StatusNotFound, Body: map[string]any{"message": "not found"}}
		}
		j := f.jobs[i]
		if route.Cancel && !j.finished() && j.lifecycle.Cancel != "" {
			j.cancelled = true
		}
		v.job = j.view()
		if route.Advance && !j.cancelled {
			j.answers++
		}
		if route.Delete {
			f.jobs = slices.Delete(f.jobs, i, i+1)
		}
	case route.List != nil:
		v.items = []any{}
		for _, j := range f.jobs {
			jv := *v
			jv.job = j.view()
			if all(route.List.Where, func(l, r string) bool { return jv.text(l) == jv.text(r) }) {
				v.items = append(v.items, jv.value(route.List.Item))
			}
		}
	}
	return route.Name, route.Respond
}

// find returns the index of the job the route's Job names, or -1.
func (f *Fake) find(route *Route, v *vars) int {
	key, by := v.text(route.Job), route.JobBy
	return slices.IndexFunc(f.jobs, func(j *job) bool {
		if by == "" {
			return j.id == key
		}
		return format(j.vars[by]) == key
	})
}

// holds reports whether the request in v fits every entry of m.
func (m Match) holds(v *vars) bool {
	for _, sub := range m.BodyContains {
		if !strings.Contains(string(v.body), sub) {
			return false
		}
	}
	return all(m.Query, func(k, want string) bool { return v.query.Has(k) && v.query.Get(k) == want }) &&
		all(m.Headers, func(k, want string) bool { return v.head.Get(k) == want }) &&
		all(m.Form, func(k, want string) bool { return v.form.Has(k) && v.form.Get(k) == want }) &&
		all(m.Body, func(p, want string) bool {
			r := gjson.GetBytes(v.body, p)
			return r.Exists() && r.String() == want
		})
}

func all(m map[string]string, ok func(k, v string) bool) bool {
	for k, v := range m {
		if !ok(k, v) {
			return false
		}
	}
	return true
}

// matchPath matches a path against a pattern of literal and {VAR}
// segments.
func matchPath(pattern, path string) (map[string]string, bool) {
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(xs) {
		return nil, false
	}
	vars := map[string]string{}
	for i, p := range ps {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			if xs[i] == "" {
				return nil, false
			}
			vars[p[1:len(p)-1]] = xs[i]
		} else if p != xs[i] {
			return nil, false
		}
	}
	return vars, true
}

// redact returns a copy of h fit to record.
func (f *Fake) redact(h http.Header) http.Header {
	out := exchanges.RedactHeaders(h, exchanges.KeepScheme)
	for _, k := range f.script.SecretHeaders {
		if out.Get(k) != "" {
			out.Set(k, "[redacted]")
		}
	}
	if a := f.script.Auth; a != nil && a.Header != "Authorization" && out.Get(a.Header) != "" {
		out.Set(a.Header, "[redacted]")
	}
	return out
}
