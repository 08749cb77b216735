package rest

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/expr"
)

// tool is a compiled JobConfig.
type tool struct {
	name    string
	start   *call
	status  *call
	cancel  *call
	respond *call
	find    *call
	queue   *queue

	jobID        expr.Value
	fromLocation bool
	states       map[string]adapters.State
	read         statusReads
	links        []link
	findField    expr.Value

	// argNames are the arguments any call or rule reads.
	argNames []string
	// carryArgs are the arguments later calls use; they travel in the
	// JobRef (all of them when carryAll is set).
	carryArgs        []string
	carryAll         bool
	carryCorrelation bool
	sendsCorrelation bool // the start call sends {correlation_id}
}

// statusReads are the compiled readings of a status answer.
type statusReads struct {
	field, message, finishedAt       expr.Value
	progressDone, progressTotal      expr.Value
	resultText, resultStructured     expr.Value
	errorCode, errorMessage          expr.Value
	inputRequests                    expr.Value
	hasProgress, hasResult, hasError bool
}

// queue follows a queue item until it names the job.
type queue struct {
	call    *call
	field   expr.Value
	message expr.Value
	timeout time.Duration
	cancel  *call
}

type call struct {
	name     string // its block: "start", "status", "job_id.queue", ...
	method   string
	path     expr.Template
	query    []param
	headers  []param
	body     bodyNode
	outcomes []outcome
}

type param struct {
	name string
	t    expr.Template
}

type link struct {
	title string
	t     expr.Template
}

// outcome is a compiled Outcome.
type outcome struct {
	status  []int
	when    *expr.Program
	is      string
	message expr.Value
}

// The meanings an outcome rule may give an answer.
const (
	isSuccess         = "success"
	isRefused         = "refused"
	isUnknown         = "unknown"
	isRetryLater      = "retry_later"
	isNotFound        = "not_found"
	isError           = "error"
	isAlreadyFinished = "already_finished"
	isCancelled       = "cancelled"
)

// meanings are the outcomes each kind of call accepts.
var meanings = map[string][]string{
	"start":               {isSuccess, isRefused, isUnknown, isRetryLater},
	"status":              {isSuccess, isNotFound, isRetryLater, isError},
	"cancel":              {isSuccess, isAlreadyFinished, isNotFound, isRefused, isRetryLater},
	"respond":             {isSuccess, isNotFound, isRefused, isRetryLater},
	"find":                {isSuccess, isNotFound, isRetryLater},
	"job_id.queue":        {isSuccess, isNotFound, isCancelled, isRefused, isRetryLater},
	"job_id.queue.cancel": {isSuccess, isAlreadyFinished, isNotFound, isRefused, isRetryLater},
}

type methodRule int

const (
	anyMethod methodRule = iota
	getOnly
	getOrPost
)

var validMethods = []string{
	http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
}

// compiler collects the problems of one job block.
type compiler struct {
	errs []error
	args map[string]bool
	all  bool
}

func (c *compiler) add(errs ...error) { c.errs = append(c.errs, errs...) }

func (c *compiler) noteArgs(names []string, all bool) {
	for _, n := range names {
		c.args[n] = true
	}
	c.all = c.all || all
}

// compileJob compiles a job block (after SetDefaults) into a tool. It
// returns every problem it finds, as field errors relative to the block;
// the tool is usable only when there are none.
func compileJob(name string, cfg *JobConfig) (*tool, []error) {
	c := &compiler{args: map[string]bool{}}
	t := &tool{name: name, fromLocation: cfg.JobID.FromLocation, states: map[string]adapters.State{}}

	located := jobScope
	t.start = c.call("start", &cfg.Start, startScope, anyMethod, cfg.JobID.FromLocation)
	t.sendsCorrelation = t.start.uses(expr.CorrelationID)

	switch {
	case cfg.JobID.Field == "" && !cfg.JobID.FromLocation:
		c.add(adapters.Fieldf("job_id", "set either field or from_location"))
	case cfg.JobID.Field != "" && cfg.JobID.FromLocation:
		c.add(adapters.Fieldf("job_id", "set only one of field and from_location"))
	}
	t.jobID = c.value("job_id.field", cfg.JobID.Field, readScope(startScope))

	if q := cfg.JobID.Queue; q != nil {
		t.queue = &queue{
			call:    c.call("job_id.queue", &q.Call, located, getOnly, cfg.JobID.FromLocation),
			field:   c.value("job_id.queue.field", q.Field, readScope(located)),
			message: c.value("job_id.queue.message", q.Message, readScope(located)),
			timeout: q.Timeout,
		}
		if q.Field == "" {
			c.add(adapters.Fieldf("job_id.queue.field", "required: where the queue answer names the job once it has left the queue"))
		}
		if q.Timeout < 0 {
			c.add(adapters.Fieldf("job_id.queue.timeout", "must be positive"))
		}
		if q.Cancel != nil {
			t.queue.cancel = c.call("job_id.queue.cancel", q.Cancel, located, anyMethod, cfg.JobID.FromLocation)
		}
	}

	t.status = c.call("status", &cfg.Status.Call, located, getOnly, cfg.JobID.FromLocation)
	c.status(t, &cfg.Status, located)
	if cfg.Cancel != nil {
		t.cancel = c.call("cancel", cfg.Cancel, located, anyMethod, cfg.JobID.FromLocation)
	}
	if cfg.Respond != nil {
		t.respond = c.call("respond", cfg.Respond, located.With(expr.Answers), anyMethod, cfg.JobID.FromLocation)
	}
	// The arguments later calls read travel in the job reference.
	later := &compiler{args: map[string]bool{}}
	for _, lc := range []*call{t.status, t.cancel, t.respond} {
		if lc != nil {
			later.noteArgs(lc.argNames())
			t.carryCorrelation = t.carryCorrelation || lc.uses(expr.CorrelationID)
		}
	}
	if t.queue != nil {
		for _, qc := range []*call{t.queue.call, t.queue.cancel} {
			if qc != nil {
				later.noteArgs(qc.argNames())
				t.carryCorrelation = t.carryCorrelation || qc.uses(expr.CorrelationID)
			}
		}
	}
	for _, l := range t.links {
		later.noteArgs(l.t.ArgNames())
		t.carryCorrelation = t.carryCorrelation || l.t.Uses(expr.CorrelationID)
	}
	for _, v := range t.read.all() {
		if p := v.Program(); p != nil {
			later.noteArgs(p.ArgNames())
			t.carryCorrelation = t.carryCorrelation || p.Uses(expr.CorrelationID)
		}
	}

	if cfg.Find != nil {
		t.find = c.call("find", &cfg.Find.Call, startScope, getOrPost, false)
		if cfg.Find.Field == "" {
			c.add(adapters.Fieldf("find.field", "required"))
		}
		t.findField = c.value("find.field", cfg.Find.Field, readScope(startScope))
		if cfg.JobID.FromLocation {
			// A job found by correlation ID has an ID but no Location.
			for _, lc := range []*call{t.status, t.cancel, t.respond} {
				if lc != nil && lc.usesName(phJobLocation) {
					c.add(adapters.Fieldf(lc.name+".path", "uses {job.location}, which a job recovered through find does not have; use {job.id}"))
				}
			}
		}
	}
	if t.queue != nil && t.find != nil {
		// A queue item that is gone is looked for with find (see
		// pollQueued): its arguments and the correlation ID travel too.
		later.noteArgs(t.find.argNames())
		if p := t.findField.Program(); p != nil {
			later.noteArgs(p.ArgNames())
		}
		t.carryCorrelation = true
	}
	t.carryArgs = sortedKeys(later.args)
	t.carryAll = later.all
	c.noteArgs(t.carryArgs, false)
	t.argNames = sortedKeys(c.args)
	return t, c.errs
}

// placeholderRE finds a {placeholder} written in a JSON path (gjson's
// multipaths, "{id,status}", have commas).
var placeholderRE = regexp.MustCompile(`\{([A-Za-z0-9_.-]+)\}`)

// value compiles a reading at path.
func (c *compiler) value(path, s string, scope expr.Scope) expr.Value {
	if s == "" {
		return expr.Value{}
	}
	v, err := expr.ParseValue(s, scope, expr.AnyKind)
	if err != nil {
		c.add(fieldErr(path, err))
		return expr.Value{}
	}
	if p := v.Program(); p != nil {
		c.noteArgs(p.ArgNames())
		return v
	}
	if m := placeholderRE.FindStringSubmatch(s); m != nil {
		c.add(adapters.Fieldf(path, "a JSON path takes no placeholders: {%s} would not be filled in (the path is applied to the answer as written; write an expression starting with \"=\" to compute a value)", m[1]))
	}
	return v
}

// call compiles one call template at block.
func (c *compiler) call(block string, cfg *Call, scope expr.Scope, rule methodRule, fromLocation bool) *call {
	cc := &call{name: block, method: strings.ToUpper(cfg.Method)}
	switch m := cc.method; {
	case m == "":
		// SetDefaults fills it.
	case rule == getOnly && m != http.MethodGet:
		c.add(adapters.Fieldf(block+".method", "must be GET (the adapter retries this call)"))
	case rule == getOrPost && m != http.MethodGet && m != http.MethodPost:
		c.add(adapters.Fieldf(block+".method", "must be GET or POST (a lookup must not change anything: the adapter retries it)"))
	case !slices.Contains(validMethods, m):
		c.add(adapters.Fieldf(block+".method", "%q is not one of %s", cfg.Method, strings.Join(validMethods, ", ")))
	}
	bodyScope := scope
	scope = without(scope, expr.Answers) // {answers} is for bodies only
	if cfg.Path == "" {
		c.add(adapters.Fieldf(block+".path", "required"))
	} else if p, err := expr.ParseTemplate(cfg.Path, scope); err != nil {
		c.add(fieldErr(block+".path", err))
	} else if err := checkPath(cfg.Path, p, fromLocation); err != nil {
		c.add(adapters.Fieldf(block+".path", "%v", err))
	} else {
		cc.path = p
	}
	for _, k := range sortedKeys(cfg.Query) {
		if k == "" {
			c.add(adapters.Fieldf(block+".query", "empty parameter name"))
		}
		t, err := expr.ParseTemplate(cfg.Query[k], scope)
		if err != nil {
			c.add(fieldErr(block+".query."+k, err))
			continue
		}
		c.checkLocation(block+".query."+k, t, fromLocation)
		cc.query = append(cc.query, param{name: k, t: t})
	}
	for _, k := range sortedKeys(cfg.Headers) {
		c.add(checkHeader(block+".headers."+k, k, cfg.Headers[k])...)
		t, err := expr.ParseTemplate(cfg.Headers[k], headerScope(scope))
		if err != nil {
			c.add(fieldErr(block+".headers."+k, err))
			continue
		}
		c.checkLocation(block+".headers."+k, t, fromLocation)
		cc.headers = append(cc.headers, param{name: k, t: t})
	}
	if cfg.Body != nil {
		method := cc.method
		if method == "" && rule == getOnly {
			method = http.MethodGet
		}
		if method == http.MethodGet || method == http.MethodDelete {
			c.add(adapters.Fieldf(block+".body", "a %s request has no body", method))
		}
		body, errs := compileBody(block+".body", cfg.Body, bodyScope)
		c.add(errs...)
		for _, t := range bodyTemplates(body) {
			c.checkLocation(block+".body", t, fromLocation)
		}
		cc.body = body
	}
	allowed := meanings[block]
	for i, o := range cfg.Outcomes {
		p := fmt.Sprintf("%s.outcomes[%d]", block, i)
		co := outcome{status: o.Status, is: o.Is}
		switch {
		case o.Is == "":
			c.add(adapters.Fieldf(p+".is", "required (one of %s)", strings.Join(allowed, ", ")))
		case !slices.Contains(allowed, o.Is):
			c.add(adapters.Fieldf(p+".is", "%q is not an outcome of a %s call (use one of %s)", o.Is, block, strings.Join(allowed, ", ")))
		}
		for j, st := range o.Status {
			if st < 100 || st > 599 {
				c.add(adapters.Fieldf(fmt.Sprintf("%s.status[%d]", p, j), "%d is not an HTTP status", st))
			}
		}
		if o.When != "" {
			w, err := expr.Compile(o.When, readScope(scope), expr.Bool)
			if err != nil {
				c.add(fieldErr(p+".when", err))
			} else {
				c.noteArgs(w.ArgNames())
				co.when = w
			}
		}
		co.message = c.value(p+".message", o.Message, readScope(scope))
		cc.outcomes = append(cc.outcomes, co)
	}
	c.noteArgs(cc.argNames())
	return cc
}

// checkLocation reports {job.location} outside a path, and without
// job_id.from_location.
func (c *compiler) checkLocation(path string, t expr.Template, fromLocation bool) {
	if slices.Contains(t.Names(), phJobLocation) && !fromLocation {
		c.add(adapters.Fieldf(path, "placeholder {%s} needs job_id.from_location", phJobLocation))
	}
}

// checkPath checks where a path's placeholders stand.
func checkPath(raw string, t expr.Template, fromLocation bool) error {
	for i, seg := range t.Segments() {
		if seg.Name == phJobLocation {
			if i != 0 {
				return errors.New("{job.location} may only begin a path")
			}
			if !fromLocation {
				return fmt.Errorf("placeholder {%s} needs job_id.from_location", phJobLocation)
			}
		}
		if seg.Lit != "" && strings.ContainsAny(seg.Lit, "?# \t\r\n") {
			return errors.New("must not contain '?', '#' or whitespace (use query for parameters)")
		}
	}
	switch {
	case strings.HasPrefix(raw, "/"):
	case strings.HasPrefix(raw, "{"+phJobLocation+"}"):
		// {job.location}/status, or {job.location}api/json after a
		// Location ending in "/"; never a dot segment.
		if rest := strings.TrimPrefix(raw, "{"+phJobLocation+"}"); strings.HasPrefix(rest, ".") {
			return errors.New("after {job.location} the path must not continue with '.'")
		}
	default:
		return errors.New(`must start with "/" or be "{job.location}"`)
	}
	return nil
}

// status compiles the status block's readings, states and links.
func (c *compiler) status(t *tool, cfg *StatusConfig, scope expr.Scope) {
	c.statusRules(t, cfg, readScope(scope), scope.With(expr.BaseURL))
}

// statusRules compiles the readings of a status answer in read scope rs,
// and the links in scope links: the rules of a status call's answer, and
// those of a callback (see compileCallbackRules).
func (c *compiler) statusRules(t *tool, cfg *StatusConfig, rs, links expr.Scope) {
	if cfg.Field == "" {
		c.add(adapters.Fieldf("status.field", "required"))
	}
	r := &t.read
	r.field = c.value("status.field", cfg.Field, rs)
	r.message = c.value("status.message", cfg.Message, rs)
	r.finishedAt = c.value("status.finished_at", cfg.FinishedAt, rs)
	r.inputRequests = c.value("status.input_requests", cfg.InputRequests, rs)
	if len(cfg.States) == 0 {
		c.add(adapters.Fieldf("status.states", "required: map the backend's status values to states"))
	}
	terminal := false
	for _, k := range sortedKeys(cfg.States) {
		st, ok := adapters.ParseState(cfg.States[k])
		if !ok {
			c.add(adapters.Fieldf("status.states."+k, "%q is not a state (working, input_required, succeeded, tool_error, cancelled, failed)", cfg.States[k]))
			continue
		}
		t.states[k] = st
		terminal = terminal || st.Terminal()
	}
	if len(cfg.States) > 0 && !terminal {
		c.add(adapters.Fieldf("status.states", "no value maps to a final state (succeeded, tool_error, cancelled, failed), so tasks would never finish"))
	}
	if p := cfg.Progress; p != nil {
		r.hasProgress = true
		if p.Done == "" {
			c.add(adapters.Fieldf("status.progress.done", "required"))
		}
		r.progressDone = c.value("status.progress.done", p.Done, rs)
		r.progressTotal = c.value("status.progress.total", p.Total, rs)
	}
	if res := cfg.Result; res != nil {
		r.hasResult = true
		if res.Text == "" && res.Structured == "" {
			c.add(adapters.Fieldf("status.result", "set text, structured or both"))
		}
		r.resultText = c.value("status.result.text", res.Text, rs)
		r.resultStructured = c.value("status.result.structured", res.Structured, rs)
	}
	if e := cfg.Error; e != nil {
		r.hasError = true
		if e.Code == "" && e.Message == "" {
			c.add(adapters.Fieldf("status.error", "set code, message or both"))
		}
		r.errorCode = c.value("status.error.code", e.Code, rs)
		r.errorMessage = c.value("status.error.message", e.Message, rs)
	}
	for _, title := range sortedKeys(cfg.Links) {
		l := cfg.Links[title]
		p := "status.links." + title
		if title == "" {
			c.add(adapters.Fieldf("status.links", "empty title"))
		}
		if !strings.HasPrefix(l, "{"+phBaseURL+"}") && !strings.HasPrefix(l, "https://") && !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "{=") {
			c.add(adapters.Fieldf(p, "must start with {base_url}, http://, https:// or be an expression {= ...}"))
		}
		lt, err := expr.ParseTemplate(l, links)
		if err != nil {
			c.add(fieldErr(p, err))
			continue
		}
		c.checkLocation(p, lt, t.fromLocation)
		names, all := lt.ArgNames()
		c.noteArgs(names, all)
		t.links = append(t.links, link{title: title, t: lt})
	}
}

// all lists the readings that are set.
func (r *statusReads) all() []expr.Value {
	var out []expr.Value
	for _, v := range []expr.Value{r.field, r.message, r.finishedAt, r.progressDone, r.progressTotal,
		r.resultText, r.resultStructured, r.errorCode, r.errorMessage, r.inputRequests} {
		if !v.IsZero() {
			out = append(out, v)
		}
	}
	return out
}

// templates lists the call's templates.
func (c *call) templates() []expr.Template {
	out := []expr.Template{c.path}
	for _, p := range c.query {
		out = append(out, p.t)
	}
	for _, p := range c.headers {
		out = append(out, p.t)
	}
	return append(out, bodyTemplates(c.body)...)
}

// argNames lists the arguments the call's templates and rules read.
func (c *call) argNames() ([]string, bool) {
	var names []string
	all := false
	for _, t := range c.templates() {
		n, a := t.ArgNames()
		names = append(names, n...)
		all = all || a
	}
	for _, o := range c.outcomes {
		if o.when != nil {
			n, a := o.when.ArgNames()
			names = append(names, n...)
			all = all || a
		}
		if p := o.message.Program(); p != nil {
			n, a := p.ArgNames()
			names = append(names, n...)
			all = all || a
		}
	}
	return names, all
}

// uses reports whether the call's templates use variable root.
func (c *call) uses(root string) bool {
	if c == nil {
		return false
	}
	for _, t := range c.templates() {
		if t.Uses(root) {
			return true
		}
	}
	return false
}

// usesName reports whether a template of the call has the placeholder name.
func (c *call) usesName(name string) bool {
	for _, t := range c.templates() {
		if slices.Contains(t.Names(), name) {
			return true
		}
	}
	return false
}

// without returns s without the variable name, which is then explained by
// s.Missing.
func without(s expr.Scope, name string) expr.Scope {
	c := s.With()
	c.Vars = slices.DeleteFunc(c.Vars, func(v string) bool { return v == name })
	return c
}

// The scopes of a callback's readings. A callback is a request the job API
// makes to the bridge about one job: its body and headers are known, and the
// job's ID once events.job_id has read it; the tool call's arguments, the
// correlation ID and an HTTP status are not.
var (
	callbackMissing = map[string]string{
		expr.Args:          "a callback does not carry the tool call's arguments",
		expr.CorrelationID: "a callback does not carry the correlation ID",
		expr.Status:        "a callback is a request to the bridge, not an answer: it has no HTTP status",
		expr.Answers:       "{answers} is only known in the respond body",
		expr.BaseURL:       "{base_url} is only known in links",
		expr.Job:           "the job is what events.job_id reads",
	}
	// callbackScope: events.job_id and events.when, read before the job
	// is known.
	callbackScope = expr.Scope{Vars: []string{expr.Body, expr.Headers}, Missing: callbackMissing}
	// callbackJobScope: the links of the status rules reading a callback.
	callbackJobScope = expr.Scope{Vars: []string{expr.Job}, Missing: callbackMissing}
	// callbackReadScope: the status rules and events.at.
	callbackReadScope = callbackJobScope.With(expr.Body, expr.Headers)
)

// compileCallbackRules compiles status rules (a status block's readings,
// states and links; its call is not used) to read a callback's body, with
// the same code as a status answer's, in the callback's scope. Its errors
// are field errors relative to the status block.
func compileCallbackRules(name string, cfg *StatusConfig) (*tool, []error) {
	c := &compiler{args: map[string]bool{}}
	// fromLocation is set so that a link's {job.location} is reported
	// below, for what it is in a callback, rather than as a missing
	// job_id.from_location.
	t := &tool{name: name, fromLocation: true, states: map[string]adapters.State{}}
	c.statusRules(t, cfg, callbackReadScope, callbackJobScope.With(expr.BaseURL))
	for _, l := range t.links {
		if slices.Contains(l.t.Names(), phJobLocation) {
			c.add(adapters.Fieldf("status.links."+l.title, "uses {%s}, which a callback does not give (it names the job by its ID only)", phJobLocation))
		}
	}
	t.fromLocation = false
	return t, c.errs
}

// callbackReads are the compiled readings of an events block that do not
// depend on the status rules.
type callbackReads struct {
	jobID expr.Value
	at    expr.Value
	when  *expr.Program
}

// compileCallbackReads compiles events.job_id, events.at and events.when;
// its errors are field errors relative to the backend block.
func compileCallbackReads(cfg *EventsConfig) (callbackReads, []error) {
	c := &compiler{args: map[string]bool{}}
	var r callbackReads
	if cfg.JobID == "" {
		c.add(adapters.Fieldf("events.job_id", `required: where a callback names its job, e.g. "id" (a JSON path into the body) or "= body.job.id"`))
	}
	r.jobID = c.value("events.job_id", cfg.JobID, callbackScope)
	r.at = c.value("events.at", cfg.At, callbackReadScope)
	if cfg.When != "" {
		w, err := expr.Compile(cfg.When, callbackScope, expr.Bool)
		if err != nil {
			c.add(fieldErr("events.when", err))
		} else {
			r.when = w
		}
	}
	return r, c.errs
}
