package batchfake

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobbridge/jobbridge/internal/fakes/exchanges"
	"github.com/jobbridge/jobbridge/internal/fakes/loopback"
)

// Limits Batch enforces, which the fake enforces too.
const (
	maxBodyBytes     = 1 << 20
	maxDescribeJobs  = 100
	maxArraySize     = 10_000
	maxDependencies  = 20
	maxRetryAttempts = 10
	minTimeout       = 60
	maxTags          = 50
	maxNameLength    = 128
	maxListResults   = 1000
	defaultListLimit = 100
	maxReasonLength  = 1024
)

// Operation names, as they appear in [Fault.Operation] and [Server.Calls].
const (
	OpSubmitJob           = "SubmitJob"
	OpDescribeJobs        = "DescribeJobs"
	OpListJobs            = "ListJobs"
	OpTerminateJob        = "TerminateJob"
	OpCancelJob           = "CancelJob"
	OpGetJobQueueSnapshot = "GetJobQueueSnapshot"
)

// operations maps request paths to operation names.
var operations = map[string]string{
	"/v1/submitjob":           OpSubmitJob,
	"/v1/describejobs":        OpDescribeJobs,
	"/v1/listjobs":            OpListJobs,
	"/v1/terminatejob":        OpTerminateJob,
	"/v1/canceljob":           OpCancelJob,
	"/v1/getjobqueuesnapshot": OpGetJobQueueSnapshot,
}

var jobNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// Options configures a [Server]. The zero value and a nil *Options select the
// defaults.
type Options struct {
	// Now is the server's clock; job states are computed from it on each
	// request. Default time.Now.
	Now func() time.Time
	// Region and AccountID appear in ARNs. Defaults "us-east-1" and
	// "123456789012".
	Region    string
	AccountID string
	// Queues, when set, are the only job queue names SubmitJob accepts;
	// another is a ClientException. Default: any queue exists.
	Queues []string
	// Retention, when positive, is how long a finished job stays visible;
	// after it the job is purged, as Batch purges old jobs. Default: forever.
	Retention time.Duration
	// TerminateGrace is how long a STARTING or RUNNING job's container has
	// to exit after the SIGTERM of a TerminateJob before it is killed; the
	// job stays RUNNING meanwhile. Default 30s, ECS's default stopTimeout,
	// as in Batch; negative means none (the container stops at once). A
	// script's terminate_delay shorter than the grace is a container that
	// exits on SIGTERM.
	TerminateGrace time.Duration
	// ListingLag is how long ListJobs leaves a new job out after its
	// submission, as Batch's listing lags its submissions (DescribeJobs
	// answers at once). Default 2s; negative means none.
	ListingLag time.Duration
	// ExchangeDir, when set, is a directory to which every HTTP exchange
	// the server answers is appended, one JSON object a line, in the file
	// batch-<pid>.jsonl (see the package documentation). Default: the
	// environment variable JOBBRIDGE_EXCHANGES; empty records nothing.
	ExchangeDir string
	// Events, when set, makes the server send its jobs' state changes as
	// EventBridge events to an API destination (see [EventsOptions] and
	// [Server.SendEvents]). Default: none.
	Events *EventsOptions
}

// Defaults of [Options].
const (
	defaultListingLag = 2 * time.Second
)

// Server is the fake Batch API. Create one with [New]; it is an
// [http.Handler] and is safe for concurrent use.
type Server struct {
	now       func() time.Time
	region    string
	account   string
	queues    []string
	retention time.Duration
	grace     time.Duration
	lag       time.Duration
	exchanges string

	mu     sync.Mutex
	seq    int
	jobs   map[string]*job // top-level jobs by ID; children hang off parents
	order  []*job          // top-level jobs, oldest first
	calls  map[string]int
	named  map[string]int
	faults []*Fault

	// lifeMu guards the listener started by Start.
	life loopback.Server

	events  *EventsOptions
	evMu    sync.Mutex // serialises deliveries; taken before mu
	evQueue []*Event   // collected, not delivered yet
	evSent  []*Event   // delivered
	evLife  sync.Mutex // guards the delivery loop's lifecycle
	evStop  context.CancelFunc
	evDone  chan struct{}
}

// New returns a server with no jobs.
func New(opts *Options) *Server {
	s := &Server{
		now:     time.Now,
		region:  "us-east-1",
		account: "123456789012",
		jobs:    make(map[string]*job),
		calls:   make(map[string]int),
		named:   make(map[string]int),
		grace:   defaultTerminateGrace,
		lag:     defaultListingLag,
	}
	s.exchanges = os.Getenv(ExchangesEnv)
	if opts != nil {
		if opts.Now != nil {
			s.now = opts.Now
		}
		if opts.Region != "" {
			s.region = opts.Region
		}
		if opts.AccountID != "" {
			s.account = opts.AccountID
		}
		s.queues = slices.Clone(opts.Queues)
		s.retention = opts.Retention
		switch {
		case opts.TerminateGrace > 0:
			s.grace = opts.TerminateGrace
		case opts.TerminateGrace < 0:
			s.grace = 0
		}
		switch {
		case opts.ListingLag > 0:
			s.lag = opts.ListingLag
		case opts.ListingLag < 0:
			s.lag = 0
		}
		if opts.ExchangeDir != "" {
			s.exchanges = opts.ExchangeDir
		}
		if opts.Events != nil {
			e := *opts.Events
			s.events = &e
		}
	}
	return s
}

// Start listens on addr (for example "127.0.0.1:0"; empty means that) and
// serves in the background until [Server.Close]. It returns the base URL,
// such as "http://127.0.0.1:41234", to use as the client's base endpoint.
// With [Options.Events] it also sends the jobs' state changes, every
// [EventsOptions.Interval], until Close.
func (s *Server) Start(addr string) (baseURL string, err error) {
	addr, err = s.life.Start("Batch fake", addr, s)
	if err != nil {
		return "", err
	}
	s.startEvents()
	return "http://" + addr, nil
}

// Close stops the listener started by [Server.Start] and closes its
// connections, and stops sending events. It is a no-op when the server was
// not started. Jobs are kept.
func (s *Server) Close() error {
	s.stopEvents()
	return s.life.Close("Batch fake")
}

// Calls returns how many requests for the operation (for example
// [OpDescribeJobs]) the server received, including those answered by an
// injected fault.
func (s *Server) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// JobsNamed returns how many jobs SubmitJob created with the name (exactly,
// case-sensitively), including purged ones.
func (s *Server) JobsNamed(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.named[name]
}

// Purge forgets a job (an array parent with its children), as Batch does
// some time after a job finished: DescribeJobs leaves it out, ListJobs no
// longer lists it and TerminateJob answers that it does not exist. Counters
// are kept.
func (s *Server) Purge(jobID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.jobs[jobID]; ok {
		delete(s.jobs, jobID)
		s.order = slices.DeleteFunc(s.order, func(o *job) bool { return o == j })
	}
}

// Fault is a scripted failure. Faults are kept in the order they were
// injected; each request consumes the first fault that matches it.
type Fault struct {
	// Operation matches the operation (for example [OpDescribeJobs]); empty
	// matches any.
	Operation string
	// Times is how many matching requests the fault affects; 0 means 1.
	Times int
	// Status is the HTTP status to answer; 0 means 500.
	Status int
	// Code is the error code sent in X-Amzn-ErrorType and the body's
	// __type. Default: TooManyRequestsException for 429, ServerException
	// for 500 (the service model's only server error, always a 500: a
	// fault with this code is answered 500 whatever Status says),
	// ServiceUnavailable (AWS's common error; no Batch operation declares a
	// 503) for 503, InternalFailure for another 5xx,
	// AccessDeniedException (an AWS common error) for 403, ClientException
	// otherwise.
	Code string
	// AfterHandling handles the request normally first (creating the job,
	// stopping it, ...) and only then answers the error: the client cannot
	// tell whether the request took effect.
	AfterHandling bool
	// Drop closes the connection without an answer (after handling the
	// request when AfterHandling is set).
	Drop bool
	// RetryAfter, when positive, adds a Retry-After header of that many
	// seconds (rounded up) to the answer. Batch documents no such header on
	// its throttling answers; it lets tests check that a client honours one
	// where a proxy or a future service version sends it.
	RetryAfter time.Duration
}

// Inject adds a fault after those already waiting.
func (s *Server) Inject(f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	if f.Status == 0 || f.Code == "ServerException" {
		f.Status = http.StatusInternalServerError
	}
	if f.Code == "" {
		switch {
		case f.Status == http.StatusTooManyRequests:
			f.Code = "TooManyRequestsException"
		case f.Status == http.StatusInternalServerError:
			f.Code = "ServerException"
		case f.Status == http.StatusServiceUnavailable:
			f.Code = "ServiceUnavailable"
		case f.Status >= 500:
			f.Code = "InternalFailure"
		case f.Status == http.StatusForbidden:
			f.Code = "AccessDeniedException"
		default:
			f.Code = "ClientException"
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults drops the faults still waiting, ending a storm.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// takeFault consumes one use of the first fault matching op.
func (s *Server) takeFault(op string) (Fault, bool) {
	for i, f := range s.faults {
		if f.Operation != "" && f.Operation != op {
			continue
		}
		f.Times--
		if f.Times == 0 {
			s.faults = slices.Delete(s.faults, i, i+1)
		}
		return *f, true
	}
	return Fault{}, false
}

// response is an answer computed under the lock and written after it.
type response struct {
	status int
	body   any
}

// apiError answers an error the way Batch does.
func apiError(status int, code, format string, args ...any) response {
	return response{status: status, body: errorBody{Type: code, Message: fmt.Sprintf(format, args...)}}
}

func clientError(format string, args ...any) response {
	return apiError(http.StatusBadRequest, "ClientException", format, args...)
}

// ServeHTTP implements the wire protocol described in the package
// documentation.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	op, known := operations[r.URL.Path]
	// Every answer carries a request ID, as Batch's do.
	w.Header()[requestIDHeader] = []string{newRequestID()}
	if s.exchanges != "" {
		rw := &recorder{ResponseWriter: w}
		ex := exchanges.Exchange{Backend: "batch", Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			RequestHeaders: exchanges.RedactHeaders(r.Header, exchanges.DropAuthorization), Operation: op}
		ex.RequestBody, ex.Truncated = exchanges.Body(body)
		defer func() {
			ex.Status, ex.ResponseHeaders = rw.status, rw.Header().Clone()
			var cut bool
			ex.ResponseBody, cut = exchanges.Body(rw.body.Bytes())
			ex.Truncated = ex.Truncated || cut
			ex.Injected = rw.injected
			if err := exchanges.Append(s.exchanges, ex); err != nil {
				fmt.Fprintf(os.Stderr, "batchfake: recording an exchange: %v\n", err)
			}
		}()
		w = rw
	}
	if !known || r.Method != http.MethodPost {
		writeResponse(w, apiError(http.StatusNotFound, "UnknownOperationException", "no operation %s %s", r.Method, r.URL.Path))
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=") {
		writeResponse(w, apiError(http.StatusForbidden, "UnrecognizedClientException", "the request carries no SigV4 signature"))
		return
	}

	s.mu.Lock()
	s.calls[op]++
	fault, faulted := s.takeFault(op)
	var resp response
	if !faulted || fault.AfterHandling {
		if readErr != nil {
			resp = clientError("reading the request body: %v", readErr)
		} else {
			resp = s.handle(op, body)
		}
	}
	s.mu.Unlock()

	if faulted {
		markInjected(w)
	}
	switch {
	case faulted && fault.Drop:
		dropConnection(w)
	case faulted:
		if fault.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.FormatInt(int64((fault.RetryAfter+time.Second-1)/time.Second), 10))
		}
		writeResponse(w, apiError(fault.Status, fault.Code, "injected fault"))
	default:
		writeResponse(w, resp)
	}
}

// handle runs one operation. It runs with s.mu held.
func (s *Server) handle(op string, body []byte) response {
	now := s.now()
	s.expire(now)
	decode := func(v any) (response, bool) {
		if len(bytes.TrimSpace(body)) == 0 {
			body = []byte("{}")
		}
		if err := json.Unmarshal(body, v); err != nil {
			return apiError(http.StatusBadRequest, "SerializationException", "malformed request body: %v", err), false
		}
		return response{}, true
	}
	switch op {
	case OpSubmitJob:
		var in submitJobInput
		if resp, ok := decode(&in); !ok {
			return resp
		}
		return s.submit(now, &in)
	case OpDescribeJobs:
		var in describeJobsInput
		if resp, ok := decode(&in); !ok {
			return resp
		}
		return s.describe(now, in.Jobs)
	case OpListJobs:
		var in listJobsInput
		if resp, ok := decode(&in); !ok {
			return resp
		}
		return s.list(now, &in)
	case OpTerminateJob, OpCancelJob:
		var in stopJobInput
		if resp, ok := decode(&in); !ok {
			return resp
		}
		return s.stopJob(now, &in, op == OpTerminateJob)
	case OpGetJobQueueSnapshot:
		var in queueSnapshotInput
		if resp, ok := decode(&in); !ok {
			return resp
		}
		return s.queueSnapshot(now, in.JobQueue)
	}
	return apiError(http.StatusNotFound, "UnknownOperationException", "no operation %s", op)
}

// expire purges the jobs whose retention has ended.
func (s *Server) expire(now time.Time) {
	if s.retention <= 0 {
		return
	}
	for _, j := range slices.Clone(s.order) {
		if st := j.at(now); st.finished() && now.Sub(st.stoppedAt) >= s.retention {
			delete(s.jobs, j.id)
			s.order = slices.DeleteFunc(s.order, func(o *job) bool { return o == j })
		}
	}
}

// lookup finds a job or array child by ID, visible or not.
func (s *Server) lookup(id string) *job {
	parentID, idx, isChild := strings.Cut(id, ":")
	j := s.jobs[parentID]
	if j == nil || !isChild {
		return j
	}
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 || i >= len(j.children) || strconv.Itoa(i) != idx {
		return nil
	}
	return j.children[i]
}

func (s *Server) submit(now time.Time, in *submitJobInput) response {
	name := deref(in.JobName)
	switch {
	case name == "":
		return clientError("jobName is required")
	case len(name) > maxNameLength || !jobNameRE.MatchString(name):
		return clientError("jobName must be 1-128 letters, digits, hyphens and underscores, starting with a letter or digit")
	case deref(in.JobQueue) == "":
		return clientError("jobQueue is required")
	case deref(in.JobDefinition) == "":
		return clientError("jobDefinition is required")
	case len(in.DependsOn) > maxDependencies:
		return clientError("at most %d dependencies are supported", maxDependencies)
	case len(in.Tags) > maxTags:
		return clientError("at most %d tags are supported", maxTags)
	}
	queue := deref(in.JobQueue)
	if _, after, ok := strings.Cut(queue, ":job-queue/"); ok {
		queue = after
	}
	if len(s.queues) > 0 && !slices.Contains(s.queues, queue) {
		return clientError("Job Queue %s not found", queue)
	}
	sc := defaultScript()
	raw, ok := in.Parameters[scriptKey]
	if !ok {
		raw, ok = in.Tags[scriptKey]
	}
	if ok {
		var err error
		if sc, err = parseScript(raw); err != nil {
			return clientError("%v", err)
		}
	}

	s.seq++
	id := fmt.Sprintf("00000000-0000-4000-8000-%012d", s.seq)
	def := deref(in.JobDefinition)
	defName := definitionName(def)
	if !strings.Contains(defName, ":") {
		defName += ":1"
	}
	j := &job{
		seq:           s.seq,
		id:            id,
		name:          name,
		arn:           s.arn("job/" + id),
		queueName:     queue,
		queueARN:      s.arn("job-queue/" + queue),
		definition:    def,
		definitionARN: s.arn("job-definition/" + defName),
		created:       now,
		script:        sc,
		grace:         s.grace,
		parameters:    in.Parameters,
		tags:          in.Tags,
		propagateTags: in.PropagateTags,
		shareID:       in.ShareIdentifier,
		priority:      in.SchedulingPriorityOverride,
		dependsOn:     in.DependsOn,
		attempts:      1,
	}
	if c := in.ContainerOverrides; c != nil {
		j.command, j.environment, j.resources = c.Command, c.Environment, c.ResourceRequirements
		if c.Vcpus != nil {
			j.resources = append(j.resources, resourceRequirement{Type: "VCPU", Value: strconv.Itoa(*c.Vcpus)})
		}
		if c.Memory != nil {
			j.resources = append(j.resources, resourceRequirement{Type: "MEMORY", Value: strconv.Itoa(*c.Memory)})
		}
	}
	for _, d := range in.DependsOn {
		dep := s.lookup(d.JobID)
		if dep == nil {
			return clientError("dependency %s does not exist", d.JobID)
		}
		j.deps = append(j.deps, dep)
	}
	if rs := in.RetryStrategy; rs != nil && rs.Attempts != nil {
		if *rs.Attempts < 1 || *rs.Attempts > maxRetryAttempts {
			return clientError("retryStrategy.attempts must be between 1 and %d", maxRetryAttempts)
		}
		j.attempts = *rs.Attempts
	}
	if t := in.Timeout; t != nil && t.AttemptDurationSeconds != nil {
		if *t.AttemptDurationSeconds < minTimeout {
			return clientError("timeout.attemptDurationSeconds must be at least %d", minTimeout)
		}
		j.timeout = *t.AttemptDurationSeconds
	}
	if a := in.ArrayProperties; a != nil && a.Size != nil {
		if *a.Size < 2 || *a.Size > maxArraySize {
			return clientError("arrayProperties.size must be between 2 and %d", maxArraySize)
		}
		j.size = *a.Size
		for i := range j.size {
			c := *j
			c.id = fmt.Sprintf("%s:%d", id, i)
			c.arn = s.arn("job/" + c.id)
			c.size, c.parent, c.index = 0, j, i
			c.deps, c.dependsOn, c.children = nil, nil, nil
			j.children = append(j.children, &c)
		}
	}
	s.jobs[id] = j
	s.order = append(s.order, j)
	s.named[name]++
	return response{status: http.StatusOK, body: submitJobOutput{JobID: id, JobName: name, JobArn: j.arn}}
}

func (s *Server) arn(resource string) string {
	return fmt.Sprintf("arn:aws:batch:%s:%s:%s", s.region, s.account, resource)
}

func (s *Server) describe(now time.Time, ids []string) response {
	if len(ids) > maxDescribeJobs {
		return clientError("Maximum number of jobs supported is %d", maxDescribeJobs)
	}
	out := describeJobsOutput{Jobs: []jobDetail{}}
	for _, id := range ids {
		if j := s.lookup(id); j != nil && j.visible(now) {
			out.Jobs = append(out.Jobs, j.detail(now))
		}
	}
	return response{status: http.StatusOK, body: out}
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// detail renders a job's JobDetail at now.
func (j *job) detail(now time.Time) jobDetail {
	st := j.at(now)
	d := jobDetail{
		JobID:              j.id,
		JobName:            j.name,
		JobArn:             j.arn,
		JobQueue:           j.queueARN,
		JobDefinition:      j.definitionARN,
		Status:             st.status,
		StatusReason:       st.reason,
		CreatedAt:          millis(j.created),
		StartedAt:          millis(st.startedAt),
		StoppedAt:          millis(st.stoppedAt),
		IsCancelled:        st.cancelled,
		IsTerminated:       st.terminated,
		Parameters:         j.parameters,
		Tags:               j.tags,
		PropagateTags:      j.propagateTags,
		ShareIdentifier:    j.shareID,
		SchedulingPriority: j.priority,
		DependsOn:          j.dependsOn,
		Attempts:           []attemptDetail{},
	}
	if j.attempts > 1 {
		d.RetryStrategy = &struct {
			Attempts int `json:"attempts"`
		}{j.attempts}
	}
	if j.timeout > 0 {
		d.Timeout = &struct {
			AttemptDurationSeconds int `json:"attemptDurationSeconds"`
		}{j.timeout}
	}
	switch {
	case j.size > 0:
		d.ArrayProperties = &arrayDetail{Size: j.size, StatusSummary: st.summary, StatusSummaryLastUpdatedAt: millis(now)}
		return d
	case j.parent != nil:
		idx := j.index
		d.ArrayProperties = &arrayDetail{Index: &idx}
	}
	c := &containerDetail{Command: j.command, Environment: j.environment, ResourceRequirements: j.resources}
	for _, a := range st.attempts {
		d.Attempts = append(d.Attempts, attemptDetail{
			Container:    attemptContainer{ExitCode: a.exit, Reason: a.reason, LogStreamName: a.logStream},
			StartedAt:    millis(a.start),
			StoppedAt:    millis(a.stop),
			StatusReason: a.reason,
		})
		c.ExitCode, c.Reason, c.LogStreamName = a.exit, a.reason, a.logStream
	}
	if st.current != nil {
		c.ExitCode, c.Reason, c.LogStreamName = nil, "", st.current.logStream
	}
	d.Container = c
	return d
}

func (s *Server) list(now time.Time, in *listJobsInput) response {
	var candidates []*job
	switch {
	case in.ArrayJobID != "":
		if p := s.jobs[in.ArrayJobID]; p != nil && p.visible(now) {
			candidates = slices.Clone(p.children)
			slices.Reverse(candidates)
		}
	case in.MultiNodeJobID != "":
		// The fake runs no multi-node jobs.
	case in.JobQueue != "":
		queue := in.JobQueue
		if _, after, ok := strings.Cut(queue, ":job-queue/"); ok {
			queue = after
		}
		for _, j := range slices.Backward(s.order) {
			if j.queueName == queue && j.visible(now) {
				candidates = append(candidates, j)
			}
		}
	default:
		return clientError("one of jobQueue, arrayJobId and multiNodeJobId is required")
	}
	if len(in.Filters) > 1 {
		return clientError("only one filter is supported")
	}
	// Batch's listing lags its submissions.
	candidates = slices.DeleteFunc(candidates, func(j *job) bool { return !s.listed(j, now) })
	match := func(j *job, st state) bool { return st.status == cmp.Or(in.JobStatus, statusRunning) }
	if len(in.Filters) == 1 {
		f := in.Filters[0]
		if len(f.Values) != 1 {
			return clientError("filter %s takes exactly one value", f.Name)
		}
		v := f.Values[0]
		switch f.Name {
		case "JOB_NAME":
			match = func(j *job, _ state) bool { return wildcard(j.name, v) }
		case "JOB_DEFINITION":
			if strings.HasPrefix(v, "arn:") && strings.Contains(v, "*") {
				return clientError("filter JOB_DEFINITION: an asterisk is not supported with an ARN")
			}
			match = func(j *job, _ state) bool { return definitionMatches(j.definitionARN, v) }
		case "SHARE_IDENTIFIER":
			// The one filter that combines with jobStatus.
			match = func(j *job, st state) bool {
				return deref(j.shareID) == v && (in.JobStatus == "" || st.status == in.JobStatus)
			}
		case "BEFORE_CREATED_AT", "AFTER_CREATED_AT":
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return clientError("filter %s needs milliseconds since the epoch", f.Name)
			}
			before := f.Name == "BEFORE_CREATED_AT"
			match = func(j *job, _ state) bool {
				if before {
					return j.created.UnixMilli() < ms
				}
				return j.created.UnixMilli() > ms
			}
		default:
			return clientError("unknown filter %q", f.Name)
		}
	}
	limit := defaultListLimit
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > maxListResults {
			return clientError("maxResults must be between 1 and %d", maxListResults)
		}
		limit = *in.MaxResults
	}
	start := 0
	if in.NextToken != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(in.NextToken, "page-"))
		if err != nil || n < 0 || !strings.HasPrefix(in.NextToken, "page-") {
			return clientError("invalid nextToken")
		}
		start = n
	}
	out := listJobsOutput{JobSummaryList: []jobSummary{}}
	var matched int
	for _, j := range candidates {
		st := j.at(now)
		if !match(j, st) {
			continue
		}
		matched++
		if matched <= start {
			continue
		}
		if len(out.JobSummaryList) == limit {
			out.NextToken = fmt.Sprintf("page-%d", start+limit)
			break
		}
		out.JobSummaryList = append(out.JobSummaryList, j.summary(st))
	}
	return response{status: http.StatusOK, body: out}
}

// definitionMatches applies a JOB_DEFINITION filter value to a job's
// definition ARN, as Batch documents it: case-sensitive; a name matches
// every revision of it, a trailing * any name that begins with the rest; an
// ARN (or name:revision) matches that revision only.
func definitionMatches(arn, v string) bool {
	if strings.HasPrefix(v, "arn:") {
		return arn == v
	}
	nameRev := definitionName(arn)
	if strings.Contains(v, ":") {
		return nameRev == v
	}
	name, _, _ := strings.Cut(nameRev, ":")
	if p, ok := strings.CutSuffix(v, "*"); ok {
		return strings.HasPrefix(name, p)
	}
	return name == v
}

// listed reports whether ListJobs lists the job at now: its listing lags
// its submission by the server's ListingLag.
func (s *Server) listed(j *job, now time.Time) bool {
	root := j
	if j.parent != nil {
		root = j.parent
	}
	return !now.Before(root.created.Add(s.lag))
}

// wildcard matches a name against a ListJobs filter value: case-insensitive,
// with a trailing * matching any suffix.
func wildcard(name, pattern string) bool {
	name, pattern = strings.ToLower(name), strings.ToLower(pattern)
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, p)
	}
	return name == pattern
}

func (j *job) summary(st state) jobSummary {
	sum := jobSummary{
		JobID:           j.id,
		JobName:         j.name,
		JobArn:          j.arn,
		JobDefinition:   j.definitionARN,
		Status:          st.status,
		StatusReason:    st.reason,
		CreatedAt:       millis(j.created),
		StartedAt:       millis(st.startedAt),
		StoppedAt:       millis(st.stoppedAt),
		ShareIdentifier: j.shareID,
	}
	switch {
	case j.size > 0:
		sum.ArrayProperties = &arrayDetail{Size: j.size}
	case j.parent != nil:
		idx := j.index
		sum.ArrayProperties = &arrayDetail{Index: &idx}
	}
	if n := len(st.attempts); n > 0 {
		last := st.attempts[n-1]
		sum.Container = &summaryExitBox{ExitCode: last.exit, Reason: last.reason}
	}
	return sum
}

func (s *Server) stopJob(now time.Time, in *stopJobInput, terminate bool) response {
	id, reason := deref(in.JobID), deref(in.Reason)
	switch {
	case id == "":
		return clientError("jobId is required")
	case in.Reason == nil:
		return clientError("reason is required")
	case len(reason) > maxReasonLength:
		return clientError("reason is longer than %d characters", maxReasonLength)
	}
	j := s.lookup(id)
	if j == nil {
		return clientError("Job %s not found", id)
	}
	j.requestStop(now, reason, terminate)
	return response{status: http.StatusOK, body: struct{}{}}
}

func (s *Server) queueSnapshot(now time.Time, queue *string) response {
	q := deref(queue)
	if q == "" {
		return clientError("jobQueue is required")
	}
	if _, after, ok := strings.Cut(q, ":job-queue/"); ok {
		q = after
	}
	type waiting struct {
		arn   string
		since time.Time
	}
	var front []waiting
	for _, j := range s.order {
		if j.queueName != q || !j.visible(now) {
			continue
		}
		for _, c := range append([]*job{j}, j.children...) {
			if c.size > 0 {
				continue
			}
			if c.at(now).status == statusRunnable {
				front = append(front, waiting{arn: c.arn, since: c.runnableSince(now)})
			}
		}
	}
	slices.SortStableFunc(front, func(a, b waiting) int { return a.since.Compare(b.since) })
	out := queueSnapshotOutput{FrontOfQueue: frontOfQueue{Jobs: []frontJob{}, LastUpdatedAt: millis(now)}}
	for i, w := range front {
		if i == maxDescribeJobs {
			break
		}
		out.FrontOfQueue.Jobs = append(out.FrontOfQueue.Jobs, frontJob{JobArn: w.arn, EarliestTimeAtPosition: millis(w.since)})
	}
	return response{status: http.StatusOK, body: out}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func writeResponse(w http.ResponseWriter, resp response) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e, ok := resp.body.(errorBody); ok {
		h.Set("X-Amzn-ErrorType", e.Type)
	}
	body, err := json.Marshal(resp.body)
	if err != nil {
		body = []byte(`{"__type":"ServerException","message":"encoding the answer failed"}`)
		resp.status = http.StatusInternalServerError
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.status)
	_, _ = w.Write(body) // the client may have gone; nothing to do
}

// dropConnection closes the client's connection without writing a response.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2, a recorder): abort the response instead.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}
