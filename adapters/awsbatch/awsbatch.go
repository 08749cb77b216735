// Package awsbatch is the adapter for AWS Batch: a tool call submits one job
// (SubmitJob), polls are answered from batched DescribeJobs calls, and a
// cancel terminates the job (TerminateJob).
//
// Submission. A job is submitted once, with the SDK's retries off for that
// call: Batch's SubmitJob has no idempotency token, so a re-sent submission
// may create a second job. The job name begins with the bridge's correlation
// ID (never the task ID) followed by "-", and the job carries the tag
// jobbridge:correlation-id. When the outcome of a submission is unknown (a
// 5xx, a timeout, a lost answer), Start says so (wrapping
// [adapters.ErrOutcomeUnknown]) and [Adapter.Find] looks the job up with
// ListJobs, filtered on the job name's prefix, in the tool's queue; finding
// nothing proves that no job exists only once listing_lag (default 60s) has
// passed since the request's SubmittedAt, and before that Find wraps
// [adapters.ErrNotListedYet]. A
// throttled submission created no job: Start returns an
// [adapters.ThrottledError] at once. A refusal (a ClientException such as
// an unknown queue) carries Batch's own message, cut to 500 bytes.
//
// Cancellation. Cancel terminates the job and tells a job that had finished
// on its own (an error wrapping [adapters.ErrAlreadyFinished]) from one it
// stopped; see [Adapter.Cancel]. Until the stop takes effect, observations
// say so: a job waiting for its dependencies is cancelled by Batch only once
// they have finished, and a running container gets SIGTERM and its stop
// timeout. Cancel, Find and the poller never retry a throttled call.
//
// Observation. Polls go through one shared poller per account and region (see
// [Pollers]): the jobs that are due are gathered into DescribeJobs calls of up
// to 100 IDs, behind a token-bucket limiter, and a poll within
// describe_interval of a job's last description is answered from it, so that
// many concurrent tasks/get cost a few DescribeJobs calls. Throttling
// (TooManyRequestsException, HTTP 429) and server errors make the poller
// back off exponentially, or for as long as a Retry-After header asks,
// without retrying inside the call. While Batch throttles, every waiting
// Poll fails at once with an [adapters.ThrottledError] (the bridge pauses
// the backend and keeps serving the last observation); server errors are
// reported in Observation.Err. A finished job's observation carries Batch's
// stoppedAt as FinishedAt. A job DescribeJobs leaves out
// (right after submission, or once Batch purged it) is reported as
// [adapters.ErrJobNotFound], and the bridge applies its missing_grace.
//
// States. SUBMITTED, PENDING, RUNNABLE, STARTING and RUNNING are working,
// with a status message saying which (the queue and Batch's statusReason
// while RUNNABLE, child counts and progress for array jobs, the attempt and
// how the last one ended while retrying); SUCCEEDED is
// succeeded; FAILED is a tool error with the reason, exit code, attempts and
// log stream, or cancelled when Batch marks the job cancelled or terminated
// or the reason is the bridge's own.
//
// Events. With an `events:` block (see [EventsConfig]) the backend also
// reads Batch's "Batch Job State Change" events, which an EventBridge rule
// sends to the bridge's event endpoint through an API destination whose
// connection authenticates with an API key: [Adapter.ReadEvents] checks the
// key in constant time, refuses an envelope older than max_age, and
// observes the event's detail (a JobDetail) with the same code as a
// DescribeJobs answer, so that an event and a poll of the same job at the
// same moment give the same observation.
//
// Credentials come only from the AWS SDK's default chain (optionally with a
// shared-config profile and an assumed role), never from the catalog.
package awsbatch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"golang.org/x/time/rate"

	"github.com/jobbridge/jobbridge/adapters"
)

// CancelReason is the reason sent with TerminateJob. Batch shows it as the
// job's statusReason, and a FAILED job with this reason is reported as
// cancelled.
const CancelReason = "jobbridge: cancelled by client"

// cancelPrefix marks a statusReason the bridge caused.
const cancelPrefix = "jobbridge:"

// tagCorrelation is the tag carrying the correlation ID on every job.
const tagCorrelation = "jobbridge:correlation-id"

// cancelMemory bounds how long the adapter remembers that it asked Batch
// to stop a job that had not stopped yet.
const cancelMemory = 24 * time.Hour

// maxFindPages bounds the ListJobs pages one Find reads.
const maxFindPages = 10

// BatchAPI is the part of the Batch client the adapter uses; *batch.Client
// implements it.
type BatchAPI interface {
	SubmitJob(ctx context.Context, in *batch.SubmitJobInput, optFns ...func(*batch.Options)) (*batch.SubmitJobOutput, error)
	DescribeJobs(ctx context.Context, in *batch.DescribeJobsInput, optFns ...func(*batch.Options)) (*batch.DescribeJobsOutput, error)
	ListJobs(ctx context.Context, in *batch.ListJobsInput, optFns ...func(*batch.Options)) (*batch.ListJobsOutput, error)
	TerminateJob(ctx context.Context, in *batch.TerminateJobInput, optFns ...func(*batch.Options)) (*batch.TerminateJobOutput, error)
	GetJobQueueSnapshot(ctx context.Context, in *batch.GetJobQueueSnapshotInput, optFns ...func(*batch.Options)) (*batch.GetJobQueueSnapshotOutput, error)
}

var _ BatchAPI = (*batch.Client)(nil)

// Options are the adapter's dependencies. The zero value is ready to use.
type Options struct {
	// Client, when set, is used instead of a client built from the backend
	// config (tests hand in a client pointed at a fake). Such an adapter gets
	// a poller of its own.
	Client BatchAPI
	// Credentials, when set, replace the SDK's default credential chain for
	// the client built from the config (`jobbridge demo` hands in static
	// credentials for the local fake). An assume_role_arn still applies.
	Credentials aws.CredentialsProvider
	// Pollers, when set, lets adapters of the same account and region share
	// one DescribeJobs poller. Default: a poller per adapter.
	Pollers *Pollers
	// Logger receives warnings (throttling, duplicate jobs); pass it already
	// scoped, for example with the backend's name. Default: none.
	Logger *slog.Logger
	// Now is the clock of cache freshness, backoff and Find's listing lag.
	// Default time.Now.
	Now func() time.Time
	// Getenv resolves the ${NAME} of the events block's api_key. Default
	// os.LookupEnv.
	Getenv func(string) (string, bool)
}

// Adapter submits, observes and terminates AWS Batch jobs. It is safe for
// concurrent use.
type Adapter struct {
	name    string
	region  string
	api     BatchAPI
	tools   map[string]*JobConfig
	tmpls   map[string]templates // by tool name
	poller  *poller
	submit  *rate.Limiter
	timeout time.Duration
	console consoleLink
	log     *slog.Logger
	now     func() time.Time
	lag     time.Duration // listing_lag
	events  *eventReader  // nil without an events block

	mu      sync.Mutex
	cancels map[string]time.Time // job ID -> when this adapter asked Batch to stop it
}

var (
	_ adapters.Adapter = (*Adapter)(nil)
	_ adapters.Finder  = (*Adapter)(nil)
	_ adapters.Batcher = (*Adapter)(nil)
)

// refData is the adapter-owned part of a JobRef.
type refData struct {
	Tool string `json:"tool"`
}

// New returns an adapter for the backend called name, serving the given
// tools (by tool name). It applies defaults to copies of the configs and
// validates them. Unless opts.Client is set, it builds a Batch client from
// the SDK's default configuration (region, profile, assumed role, endpoint);
// that reads the shared config files but calls no AWS API: credentials are
// resolved on first use.
func New(name string, backend BackendConfig, tools map[string]JobConfig, opts *Options) (*Adapter, error) {
	if opts == nil {
		opts = &Options{}
	}
	backend.SetDefaults()
	var errs []error
	if err := backend.Validate(); err != nil {
		errs = append(errs, err)
	}
	a := &Adapter{
		name:    name,
		region:  backend.Region,
		tools:   map[string]*JobConfig{},
		tmpls:   map[string]templates{},
		submit:  rate.NewLimiter(rate.Limit(backend.SubmitRate), burst(backend.SubmitRate)),
		timeout: backend.Timeout,
		console: parseConsoleLink(backend.ConsoleURL),
		log:     opts.Logger,
		now:     opts.Now,
		lag:     backend.ListingLag,
		cancels: map[string]time.Time{},
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	for _, tn := range sortedKeys(tools) {
		cfg := tools[tn]
		cfg.SetDefaults()
		if cfg.JobName == "" {
			cfg.JobName = tn
		}
		if err := cfg.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("tool %q: %w", tn, err))
			continue
		}
		ts, err := compileTemplates(&cfg)
		if err != nil {
			errs = append(errs, fmt.Errorf("tool %q: %w", tn, err))
			continue
		}
		a.tools[tn] = &cfg
		a.tmpls[tn] = ts
	}
	if backend.Events != nil && backend.Events.Validate() == nil {
		getenv := opts.Getenv
		if getenv == nil {
			getenv = os.LookupEnv
		}
		ev, err := newEventReader(backend.Events, getenv, a.log)
		if err != nil {
			errs = append(errs, err)
		}
		a.events = ev
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err // the caller names the backend
	}

	a.api = opts.Client
	newPoller := func() *poller { return newPoller(a.api, backend, a.now, a.log) }
	if a.api == nil {
		client, err := newClient(backend, opts.Credentials)
		if err != nil {
			return nil, fmt.Errorf("aws_batch backend %q: %w", name, err)
		}
		a.api = client
		if opts.Pollers != nil {
			a.poller = opts.Pollers.get(keyOf(backend), newPoller)
		}
	}
	if a.poller == nil {
		a.poller = newPoller()
	}
	return a, nil
}

// burst is a limiter's bucket size for a rate: one second's worth.
func burst(perSecond float64) int { return max(1, int(perSecond+0.999)) }

// newClient builds a Batch client from the SDK's default configuration.
func newClient(b BackendConfig, creds aws.CredentialsProvider) (*batch.Client, error) {
	load := []func(*config.LoadOptions) error{config.WithRegion(b.Region)}
	if b.Profile != "" {
		load = append(load, config.WithSharedConfigProfile(b.Profile))
	}
	if creds != nil {
		load = append(load, config.WithCredentialsProvider(creds))
	}
	// Building the adapter is not a request path: loading the shared
	// configuration reads files and calls no service.
	cfg, err := config.LoadDefaultConfig(context.Background(), load...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if b.AssumeRoleARN != "" {
		provider := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), b.AssumeRoleARN, func(o *stscreds.AssumeRoleOptions) {
			o.RoleSessionName = "jobbridge"
		})
		cfg.Credentials = aws.NewCredentialsCache(provider)
	}
	return batch.NewFromConfig(cfg, func(o *batch.Options) {
		if b.Endpoint != "" {
			o.BaseEndpoint = aws.String(b.Endpoint)
		}
	}), nil
}

func (a *Adapter) tool(name string) (*JobConfig, error) {
	t, ok := a.tools[name]
	if !ok {
		return nil, fmt.Errorf("aws_batch backend %q has no tool %q", a.name, name)
	}
	return t, nil
}

// Start submits one job with one SubmitJob call. See [adapters.Adapter] for
// how outcomes are classified.
func (a *Adapter) Start(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, error) {
	t, err := a.tool(req.Tool)
	if err != nil {
		return adapters.JobRef{}, err
	}
	in, err := submitInput(ctx, t, a.tmpls[req.Tool], req)
	if err != nil {
		return adapters.JobRef{}, err // "the arguments do not make a valid job: ..."
	}
	if err := a.submit.Wait(ctx); err != nil {
		return adapters.JobRef{}, fmt.Errorf("SubmitJob was not sent: waiting for the submit rate limit: %w", err)
	}
	rec := &sendRecord{}
	cctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	out, err := a.api.SubmitJob(cctx, in, func(o *batch.Options) {
		o.RetryMaxAttempts = 1
		o.HTTPClient = &recordingClient{next: o.HTTPClient, rec: rec}
	})
	if err != nil {
		return adapters.JobRef{}, classifySubmit(err, rec.maybeSent.Load())
	}
	id := aws.ToString(out.JobId)
	if id == "" {
		return adapters.JobRef{}, &adapters.CallError{Class: adapters.ProblemUnreadable, Method: "SubmitJob", Status: http.StatusOK,
			Message: fmt.Sprintf("the answer has no job ID for job %s", aws.ToString(in.JobName)), Err: adapters.ErrOutcomeUnknown}
	}
	return jobRef(id, req.Tool), nil
}

func jobRef(id, tool string) adapters.JobRef {
	b, _ := json.Marshal(refData{Tool: tool}) // a struct of strings always marshals
	return adapters.JobRef{ID: id, Data: b}
}

// noteCancel remembers that the adapter asked Batch to stop the job, so
// that its observations can say that the stop has not taken effect yet.
func (a *Adapter) noteCancel(jobID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for id, at := range a.cancels {
		if now.Sub(at) >= cancelMemory {
			delete(a.cancels, id)
		}
	}
	a.cancels[jobID] = now
}

// cancelSent reports whether this adapter asked Batch to stop the job; a
// job seen finished is forgotten.
func (a *Adapter) cancelSent(jobID string, final bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.cancels[jobID]
	if final {
		delete(a.cancels, jobID)
	}
	return ok
}

// BatchSize implements [adapters.Batcher]: one DescribeJobs call takes up to
// 100 job IDs.
func (a *Adapter) BatchSize() int { return maxDescribe }

// Poll observes the jobs through the shared poller: jobs described less
// than describe_interval ago are answered from their last description, the
// others are described together in DescribeJobs calls of up to 100 IDs. It
// returns an error when ctx ends while waiting, and an
// [adapters.ThrottledError] when Batch throttled the DescribeJobs call that
// was to describe any of the jobs (or the poller is still pausing after
// one): throttling concerns the whole account and region, so the bridge
// should pause the backend.
func (a *Adapter) Poll(ctx context.Context, refs []adapters.JobRef) ([]adapters.Observation, error) {
	if len(refs) == 0 {
		return []adapters.Observation{}, nil
	}
	ids := make([]string, len(refs))
	for i, r := range refs {
		ids[i] = r.ID
	}
	descs, err := a.poller.describe(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, d := range descs {
		if errors.Is(d.err, adapters.ErrThrottled) {
			return nil, fmt.Errorf("observing %s jobs: %w", a.name, d.err)
		}
	}
	obs := make([]adapters.Observation, len(refs))
	for i, d := range descs {
		switch {
		case d.err != nil:
			obs[i] = adapters.Observation{Err: d.err}
		case d.detail == nil:
			obs[i] = adapters.Observation{Err: &adapters.CallError{Class: adapters.ProblemNotFound,
				Message: fmt.Sprintf("DescribeJobs does not list AWS Batch job %s", ids[i]), Err: adapters.ErrJobNotFound}}
		default:
			obs[i] = a.observe(d)
		}
	}
	return obs, nil
}

// Cancel terminates the job with [CancelReason]. TerminateJob, unlike
// CancelJob, also stops STARTING and RUNNING jobs.
//
// TerminateJob answers a job that has already finished exactly as one it
// stops, so Cancel tells them apart by the job's description: a job the
// poller already knows finished (or stopped) is not terminated again, and
// otherwise the job is described once after TerminateJob. A job that SUCCEEDED, or FAILED
// for a reason that is not the bridge's (its own exit code, a timeout, a
// failed dependency: Batch sets the terminate reason on a job it stops),
// had finished before the cancel: the error wraps
// [adapters.ErrAlreadyFinished]. A job this adapter stopped, or that Batch
// no longer knows, is not an error. Throttling is an
// [adapters.ThrottledError] (not retried here); another refusal (a 4xx such
// as AccessDeniedException) wraps [adapters.ErrCancelRefused] with Batch's
// message.
func (a *Adapter) Cancel(ctx context.Context, ref adapters.JobRef) error {
	if ref.ID == "" {
		return errors.New("terminating AWS Batch job: the job reference has no ID")
	}
	if d := a.poller.known(ref.ID); d != nil && (d.Status == types.JobStatusSucceeded || d.Status == types.JobStatusFailed) {
		// Final: nothing to stop, and no call to make.
		if finished(d) {
			return finishedError(ref.ID, d)
		}
		return nil // this bridge stopped it
	}
	cctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	_, err := a.api.TerminateJob(cctx, &batch.TerminateJobInput{JobId: aws.String(ref.ID), Reason: aws.String(CancelReason)}, withoutThrottleRetries)
	switch status := httpStatus(err); {
	case err == nil:
	case isJobNotFound(err):
		return nil
	case isThrottle(err):
		return throttled(problem("TerminateJob", nil, err), err)
	case status >= 400 && status < 500 && status != http.StatusRequestTimeout:
		return problem("TerminateJob", adapters.ErrCancelRefused, err)
	default:
		return problem("TerminateJob", nil, err)
	}
	a.noteCancel(ref.ID)
	// Describe it afresh, now and for the next poll: did it finish
	// before the terminate reached it?
	a.poller.invalidate(ref.ID)
	if descs, err := a.poller.describe(cctx, []string{ref.ID}); err == nil && descs[0].err == nil && descs[0].detail != nil && finished(descs[0].detail) {
		return finishedError(ref.ID, descs[0].detail)
	}
	return nil
}

// finished reports whether a job finished on its own: SUCCEEDED, or FAILED
// with a statusReason the bridge did not give.
func finished(d *types.JobDetail) bool {
	switch d.Status {
	case types.JobStatusSucceeded:
		return true
	case types.JobStatusFailed:
		return !strings.HasPrefix(aws.ToString(d.StatusReason), cancelPrefix)
	}
	return false
}

// finishedError says that the job had finished before the cancel.
func finishedError(id string, d *types.JobDetail) error {
	msg := fmt.Sprintf("AWS Batch job %s had already finished (%s", id, d.Status)
	if r := aws.ToString(d.StatusReason); r != "" {
		msg += ": " + r
	}
	if ms := aws.ToInt64(d.StoppedAt); ms > 0 {
		msg += ", stopped at " + time.UnixMilli(ms).UTC().Format(time.RFC3339)
	}
	return fmt.Errorf("%s): %w", msg, adapters.ErrAlreadyFinished)
}

// Find looks for the job submitted with req's correlation ID: ListJobs in the
// tool's queue, filtered on the job name prefix. Batch matches the filter
// case-insensitively; the adapter then compares exactly. When several jobs
// match (which Start never causes), the oldest is adopted and the others are
// logged.
//
// ListJobs lags submissions, so finding nothing proves that no job exists
// only once the backend's listing_lag has passed since req.SubmittedAt (zero
// means now: a process that restarted knows the moment from the store).
// Until then Find returns an error wrapping [adapters.ErrNotListedYet], and
// the bridge searches again later.
func (a *Adapter) Find(ctx context.Context, req adapters.StartRequest) (adapters.JobRef, bool, error) {
	t, err := a.tool(req.Tool)
	if err != nil {
		return adapters.JobRef{}, false, err
	}
	prefix := namePrefix(req.CorrelationID)
	in := &batch.ListJobsInput{
		JobQueue: aws.String(t.JobQueue),
		Filters:  []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{prefix + "*"}}},
	}
	var found []types.JobSummary
	for range maxFindPages {
		cctx, cancel := context.WithTimeout(ctx, a.timeout)
		out, err := a.api.ListJobs(cctx, in, withoutThrottleRetries)
		cancel()
		if err != nil {
			if isThrottle(err) {
				return adapters.JobRef{}, false, throttled(problem("ListJobs", nil, err), err)
			}
			return adapters.JobRef{}, false, problem("ListJobs", nil, err)
		}
		for _, s := range out.JobSummaryList {
			if strings.HasPrefix(aws.ToString(s.JobName), prefix) && aws.ToString(s.JobId) != "" {
				found = append(found, s)
			}
		}
		if aws.ToString(out.NextToken) == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	if len(found) == 0 {
		now := a.now()
		sent := req.SubmittedAt
		if sent.IsZero() || sent.After(now) {
			sent = now
		}
		if wait := a.lag - now.Sub(sent); wait > 0 {
			return adapters.JobRef{}, false, fmt.Errorf("looking for %s job %s* in queue %s: %w (Batch lists a job up to %v after its submission, %v from now)",
				req.Tool, prefix, t.JobQueue, adapters.ErrNotListedYet, a.lag, wait.Round(time.Second))
		}
		return adapters.JobRef{}, false, nil
	}
	slices.SortStableFunc(found, func(x, y types.JobSummary) int {
		return cmp.Compare(aws.ToInt64(x.CreatedAt), aws.ToInt64(y.CreatedAt))
	})
	if len(found) > 1 {
		ids := make([]string, len(found))
		for i, s := range found {
			ids[i] = aws.ToString(s.JobId)
		}
		a.log.Warn("several Batch jobs carry one correlation ID; adopting the oldest", "correlation", req.CorrelationID, "jobs", ids)
	}
	return jobRef(aws.ToString(found[0].JobId), req.Tool), true, nil
}

// namePrefix is the start of the job name of every job submitted with the
// correlation ID: the ID in the characters Batch allows, and "-".
func namePrefix(correlationID string) string {
	p := sanitizeName(correlationID)
	if p == "" || !isAlnum(p[0]) {
		p = "j" + p
	}
	return p + "-"
}

// jobName is the name a job is submitted with: the correlation prefix and the
// rendered name template, in Batch's alphabet, at most 128 characters.
func jobName(correlationID, rendered string) string {
	name := namePrefix(correlationID) + sanitizeName(rendered)
	if len(name) > maxJobName {
		name = name[:maxJobName]
	}
	return name
}

// sanitizeName replaces every character Batch does not allow in a job name
// with "_".
func sanitizeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 && (isAlnum(byte(r)) || r == '-' || r == '_') {
			b.WriteRune(r)
			continue
		}
		b.WriteByte('_')
	}
	return b.String()
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// submitInput renders a tool's job block into a SubmitJob request.
// Every field is rendered; the problems of all of them are reported
// together, each named by its field.
func submitInput(ctx context.Context, t *JobConfig, ts templates, req adapters.StartRequest) (*batch.SubmitJobInput, error) {
	v := vars(req)
	var errs []error
	field := func(path, s string) string {
		out, err := ts.render(ctx, s, v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
		return out
	}
	in := &batch.SubmitJobInput{
		JobName:       aws.String(jobName(req.CorrelationID, field("job_name", t.JobName))),
		JobQueue:      aws.String(t.JobQueue),
		JobDefinition: aws.String(t.JobDefinition),
		PropagateTags: t.PropagateTags,
		Tags:          map[string]string{tagCorrelation: req.CorrelationID},
	}
	if len(t.Parameters) > 0 {
		in.Parameters = renderMap("parameters.", t.Parameters, field)
	}
	number := func(path, tmpl string, kind numberKind) string {
		if tmpl == "" {
			return ""
		}
		s := strings.TrimSpace(field(path, tmpl))
		if s == "" {
			return ""
		}
		n, err := parseNumber(s, kind)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
		return n
	}
	if o := t.ContainerOverrides; o != nil {
		co := &types.ContainerOverrides{}
		for i, c := range o.Command {
			co.Command = append(co.Command, field(fmt.Sprintf("container_overrides.command[%d]", i), c))
		}
		for _, k := range sortedKeys(o.Environment) {
			if val := field("container_overrides.environment."+k, o.Environment[k]); val != "" {
				co.Environment = append(co.Environment, types.KeyValuePair{Name: aws.String(k), Value: aws.String(val)})
			}
		}
		for _, r := range []struct {
			field string
			tmpl  string
			kind  numberKind
			typ   types.ResourceType
		}{
			{"container_overrides.vcpus", o.VCPUs, numPositive, types.ResourceTypeVcpu},
			{"container_overrides.memory", o.Memory, intPositive, types.ResourceTypeMemory},
			{"container_overrides.gpus", o.GPUs, intNonNegative, types.ResourceTypeGpu},
		} {
			if n := number(r.field, r.tmpl, r.kind); n != "" && n != "0" {
				co.ResourceRequirements = append(co.ResourceRequirements, types.ResourceRequirement{Type: r.typ, Value: aws.String(n)})
			}
		}
		in.ContainerOverrides = co
	}
	if n := number("array_size", t.ArraySize, arraySize); n != "" {
		if size, _ := strconv.Atoi(n); size >= 2 {
			in.ArrayProperties = &types.ArrayProperties{Size: aws.Int32(int32(size))}
		}
	}
	for i, d := range t.DependsOn {
		id := strings.TrimSpace(field(fmt.Sprintf("depends_on[%d].job_id", i), d.JobID))
		if id == "" {
			continue
		}
		dep := types.JobDependency{JobId: aws.String(id)}
		if d.Type != "" {
			dep.Type = types.ArrayJobDependency(d.Type)
		}
		in.DependsOn = append(in.DependsOn, dep)
	}
	if t.RetryAttempts > 0 {
		in.RetryStrategy = &types.RetryStrategy{Attempts: aws.Int32(int32(t.RetryAttempts))}
	}
	if t.TimeoutSeconds > 0 {
		in.Timeout = &types.JobTimeout{AttemptDurationSeconds: aws.Int32(int32(t.TimeoutSeconds))}
	}
	for k, val := range renderMap("tags.", t.Tags, field) {
		in.Tags[k] = val
	}
	if s := field("share_identifier", t.ShareIdentifier); s != "" {
		in.ShareIdentifier = aws.String(s)
	}
	if p := t.SchedulingPriority; p != nil {
		in.SchedulingPriorityOverride = aws.Int32(int32(*p))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("the arguments do not make a valid job: %w", err)
	}
	return in, nil
}

// renderMap renders a map of templates (the field at prefix), leaving out
// entries that render empty.
func renderMap(prefix string, m map[string]string, render func(path, tmpl string) string) map[string]string {
	out := make(map[string]string, len(m))
	for _, k := range sortedKeys(m) {
		if v := render(prefix+k, m[k]); v != "" {
			out[k] = v
		}
	}
	return out
}

// consoleURL renders the console link of a job, or "" without a template.
func (a *Adapter) consoleURL(jobID string) string {
	if len(a.console) == 0 {
		return ""
	}
	var b strings.Builder
	for _, seg := range a.console {
		switch seg.ph {
		case "":
			b.WriteString(seg.lit)
		case phRegion:
			b.WriteString(url.PathEscape(a.region))
		case phJobID:
			b.WriteString(url.PathEscape(jobID))
		}
	}
	return b.String()
}
