package awsbatch

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/expr"
)

// BackendConfig is a `type: aws_batch` backend in the catalog: which account
// and region to talk to, and how hard. Credentials never appear here: they
// come from the AWS SDK's default chain (environment, shared config and
// credentials files, SSO, container and instance roles), optionally through
// a profile and an assumed role.
//
//	backends:
//	  batch:
//	    type: aws_batch
//	    region: eu-west-1
//	    assume_role_arn: arn:aws:iam::123456789012:role/jobbridge
type BackendConfig struct {
	// Region is the AWS region of the job queues, e.g. "eu-west-1".
	// Required.
	Region string `yaml:"region"`
	// Endpoint, when set, overrides the Batch API's base endpoint, e.g. a
	// VPC endpoint or a local fake (http://127.0.0.1:4566).
	Endpoint string `yaml:"endpoint"`
	// Profile selects a profile of the shared AWS config files.
	Profile string `yaml:"profile"`
	// AssumeRoleARN, when set, is an IAM role assumed (through STS) with the
	// credentials of the default chain.
	AssumeRoleARN string `yaml:"assume_role_arn"`
	// DescribeRate bounds DescribeJobs calls per second, shared by every tool
	// of the backend (and every backend in the same account and region).
	// Default 5.
	DescribeRate float64 `yaml:"describe_rate"`
	// SubmitRate bounds SubmitJob calls per second. Batch allows 50 per
	// account and region. Default 20.
	SubmitRate float64 `yaml:"submit_rate"`
	// DescribeInterval is how long a job's description is reused: a poll
	// within it is answered from the last DescribeJobs answer. Polls of jobs
	// that are due are gathered into DescribeJobs calls of up to 100 jobs.
	// Set it to the tools' refresh_interval or more. Default 2s.
	DescribeInterval time.Duration `yaml:"describe_interval"`
	// QueuePosition, when true, reports a RUNNABLE job's position in its
	// queue (from GetJobQueueSnapshot, at most once per queue and
	// describe_interval; needs batch:GetJobQueueSnapshot). Default false.
	QueuePosition bool `yaml:"queue_position"`
	// ConsoleURL is the template of a link to a job in a web console, with
	// placeholders {region} and {job_id}; without it no link is given.
	ConsoleURL string `yaml:"console_url"`
	// Timeout bounds each API call. Default 10s.
	Timeout time.Duration `yaml:"timeout"`
	// ListingLag is how long after a submission ListJobs may still leave
	// the new job out. When a submission's outcome was unknown, a search
	// that finds no job within listing_lag of when it was sent proves
	// nothing: the bridge searches again later, and concludes that no job
	// was created only after it. Default 60s; 10s to 1h.
	ListingLag time.Duration `yaml:"listing_lag"`
	// Events, when set, has Batch's job state changes pushed to the
	// bridge by an EventBridge API destination; see [EventsConfig].
	Events *EventsConfig `yaml:"events"`
}

// EventsConfig is a backend's `events:` block: Batch's "Batch Job State
// Change" events reach the bridge's event endpoint (POST
// /events/BACKEND) through an EventBridge rule whose target is an API
// destination, and the bridge applies them as observations, polling the
// jobs that get them only every poll_interval.
//
//	events:
//	  api_key_header: X-Jobbridge-Key
//	  api_key: ${BATCH_EVENTS_KEY}
//
// An API destination signs nothing: it sends the credential of its
// EventBridge connection, here an API key (a header name and a secret
// value), which the adapter compares in constant time. A delivery without
// it, or with another value, is refused as forged. No timestamp is signed
// either, so the replay defence is the bridge's de-duplication of the
// envelope's id, which a redelivery keeps; the adapter also refuses an
// envelope whose time is more than max_age before it arrives (EventBridge
// gives up on an event after at most 24 hours of retries), as replayed.
type EventsConfig struct {
	// APIKeyHeader is the name of the header the EventBridge connection's
	// API key authorization sends ("API key name"), e.g. X-Jobbridge-Key.
	// Required; not a header EventBridge sets itself (Content-Type,
	// User-Agent, Range, ...).
	APIKeyHeader string `yaml:"api_key_header"`
	// APIKey is the key's value ("Value"), written as one ${NAME}
	// (an environment variable, read at start) or ${file:/path} (a file,
	// read at start and again whenever it changes, so that the key can be
	// rotated without a restart) reference, never the key itself. Required:
	// without it anyone could send the endpoint job events. At least 16
	// characters; 32 random bytes, base64-encoded, is a good key.
	APIKey string `yaml:"api_key"`
	// MaxAge refuses an envelope whose time is longer than this before the
	// delivery arrived, as a replay. Default 24h, EventBridge's longest
	// retry window (a target's MaximumEventAgeInSeconds); 5m to 72h. Keep
	// it within the bridge's de-duplication horizon.
	MaxAge time.Duration `yaml:"max_age"`
	// PollInterval is how often a job that has received an event is still
	// polled while events flow: the safety net for a lost delivery.
	// Default 10m; 30s to 24h.
	PollInterval time.Duration `yaml:"poll_interval"`
	// Quiet is how long the backend may send no event before the bridge
	// considers its events stopped and polls at the tools' own refresh
	// intervals again. Default 30m; 1m to 7 days.
	Quiet time.Duration `yaml:"quiet"`
}

// JobConfig is a tool's `job:` block on an aws_batch backend: the SubmitJob
// request a call makes.
//
// Templates. job_name, parameter values, command elements, environment
// values, vcpus, memory, gpus, array_size, depends_on job IDs, tag values
// and share_identifier are templates of package
// [github.com/jobbridge/jobbridge/adapters/expr]: they may contain
// {args.NAME} (a tool argument), {correlation_id} and {= EXPR}, a CEL
// expression over args and correlation_id, such as
// {= args.env == "prod" ? "high" : "low"}. Expressions are type-checked when
// the catalog loads. An absent argument (or an expression giving null)
// renders as empty text; a parameter, environment variable, tag or
// dependency that renders empty is left out. An expression that fails when a
// call is made (reading an argument the caller left out without has(), say)
// fails the call before anything is submitted.
type JobConfig struct {
	// JobQueue is the queue's name or ARN. Required; fixed per tool (a job
	// whose submission had an unknown outcome is looked for in it).
	JobQueue string `yaml:"job_queue"`
	// JobDefinition is the definition's name, name:revision or ARN.
	// Required.
	JobDefinition string `yaml:"job_definition"`
	// JobName is the job name template. The adapter prefixes it with the
	// correlation ID and a hyphen, replaces characters Batch does not allow
	// with "_" and cuts it to 128 characters. Default: the tool's name.
	JobName string `yaml:"job_name"`
	// Parameters fill Ref:: placeholders of the job definition.
	Parameters map[string]string `yaml:"parameters"`
	// ContainerOverrides override the definition's container.
	ContainerOverrides *ContainerOverrides `yaml:"container_overrides"`
	// ArraySize makes the job an array job of that many children (2 to
	// 10,000): an integer or a template. Empty, 0 or 1 submit a single job.
	ArraySize string `yaml:"array_size"`
	// DependsOn lists jobs that must finish first (at most 20).
	DependsOn []Dependency `yaml:"depends_on"`
	// RetryAttempts is how many attempts a failing job gets (1 to 10); 0
	// keeps the job definition's.
	RetryAttempts int `yaml:"retry_attempts"`
	// TimeoutSeconds stops an attempt that runs longer (at least 60); 0
	// keeps the job definition's.
	TimeoutSeconds int `yaml:"timeout_seconds"`
	// Tags are added to the job, beside the adapter's own
	// jobbridge:correlation-id tag (at most 49; keys must not start with
	// "aws:" or "jobbridge:").
	Tags map[string]string `yaml:"tags"`
	// PropagateTags copies the tags to the ECS task. Unset keeps the job
	// definition's.
	PropagateTags *bool `yaml:"propagate_tags"`
	// ShareIdentifier is the fair-share identifier (fair-share queues only).
	ShareIdentifier string `yaml:"share_identifier"`
	// SchedulingPriority overrides the definition's scheduling priority
	// (0 to 9999; fair-share queues only).
	SchedulingPriority *int `yaml:"scheduling_priority"`
}

// ContainerOverrides are the container settings a tool overrides.
type ContainerOverrides struct {
	// Command replaces the definition's command; each element is a template.
	Command []string `yaml:"command"`
	// Environment adds or replaces environment variables; values are
	// templates. Names must not start with AWS_BATCH.
	Environment map[string]string `yaml:"environment"`
	// VCPUs is the number of vCPUs (fractions such as 0.25 on Fargate): a
	// number or a template.
	VCPUs string `yaml:"vcpus"`
	// Memory is the memory in MiB: an integer or a template.
	Memory string `yaml:"memory"`
	// GPUs is the number of GPUs: an integer or a template; 0 requests none.
	GPUs string `yaml:"gpus"`
}

// Dependency is one entry of depends_on.
type Dependency struct {
	// JobID is the job to wait for: a template, typically {args.NAME}.
	JobID string `yaml:"job_id"`
	// Type is N_TO_N or SEQUENTIAL for array job dependencies; empty for a
	// plain dependency.
	Type string `yaml:"type"`
}

// Defaults applied by SetDefaults, and limits checked by Validate.
const (
	defaultDescribeRate     = 5
	defaultSubmitRate       = 20
	defaultDescribeInterval = 2 * time.Second
	defaultTimeout          = 10 * time.Second
	defaultListingLag       = time.Minute
	defaultEventsMaxAge     = 24 * time.Hour
	defaultEventsPoll       = 10 * time.Minute
	defaultEventsQuiet      = 30 * time.Minute

	maxDescribeRate     = 100
	maxSubmitRate       = 50 // Batch's fixed SubmitJob quota per account and region
	minDescribeInterval = 10 * time.Millisecond
	maxDescribeInterval = 10 * time.Minute
	maxTimeout          = 5 * time.Minute
	minListingLag       = 10 * time.Second
	maxListingLag       = time.Hour
	minEventsMaxAge     = 5 * time.Minute
	maxEventsMaxAge     = 72 * time.Hour
	minEventsPoll       = 30 * time.Second
	maxEventsPoll       = 24 * time.Hour
	minEventsQuiet      = time.Minute
	maxEventsQuiet      = 7 * 24 * time.Hour
	minAPIKeyLength     = 16
	maxAPIKeyLength     = 512

	maxJobName       = 128
	maxArraySize     = 10_000
	maxDependencies  = 20
	maxRetryAttempts = 10
	minTimeout       = 60
	maxUserTags      = 49 // Batch allows 50; the adapter adds one
	maxTagKey        = 128
	maxTagValue      = 256
	maxPriority      = 9999
)

var (
	regionRE     = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	roleARNRE    = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}$`)
	queueRE      = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9_-]{0,127}|arn:aws[a-z-]*:batch:[a-z0-9-]+:[0-9]{12}:job-queue/[A-Za-z0-9][A-Za-z0-9_-]{0,127})$`)
	definitionRE = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9_-]{0,127}(:[1-9][0-9]*)?|arn:aws[a-z-]*:batch:[a-z0-9-]+:[0-9]{12}:job-definition/[A-Za-z0-9][A-Za-z0-9_-]{0,127}(:[1-9][0-9]*)?)$`)
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// SetDefaults fills the fields the operator left out.
func (c *BackendConfig) SetDefaults() {
	if c.DescribeRate == 0 {
		c.DescribeRate = defaultDescribeRate
	}
	if c.SubmitRate == 0 {
		c.SubmitRate = defaultSubmitRate
	}
	if c.DescribeInterval == 0 {
		c.DescribeInterval = defaultDescribeInterval
	}
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	if c.ListingLag == 0 {
		c.ListingLag = defaultListingLag
	}
	if c.Events != nil {
		c.Events.SetDefaults()
	}
}

// SetDefaults fills the fields of the events block the operator left out.
func (c *EventsConfig) SetDefaults() {
	if c.MaxAge == 0 {
		c.MaxAge = defaultEventsMaxAge
	}
	if c.PollInterval == 0 {
		c.PollInterval = defaultEventsPoll
	}
	if c.Quiet == 0 {
		c.Quiet = defaultEventsQuiet
	}
}

// Validate reports every problem in the backend block, joined, each as an
// [adapters.FieldError] whose path is relative to the block. It may be called
// before or after SetDefaults.
func (c *BackendConfig) Validate() error {
	var errs []error
	switch {
	case c.Region == "":
		errs = append(errs, adapters.Fieldf("region", "required (e.g. eu-west-1)"))
	case !regionRE.MatchString(c.Region):
		errs = append(errs, adapters.Fieldf("region", "%q is not an AWS region name such as eu-west-1", c.Region))
	}
	if c.Endpoint != "" {
		if err := checkEndpoint(c.Endpoint); err != nil {
			errs = append(errs, adapters.Fieldf("endpoint", "%v", err))
		}
	}
	if strings.ContainsFunc(c.Profile, func(r rune) bool { return r < ' ' || r == 0x7f }) || strings.TrimSpace(c.Profile) != c.Profile {
		errs = append(errs, adapters.Fieldf("profile", "contains control characters or surrounding spaces"))
	}
	if c.AssumeRoleARN != "" && !roleARNRE.MatchString(c.AssumeRoleARN) {
		errs = append(errs, adapters.Fieldf("assume_role_arn", "%q is not an IAM role ARN (arn:aws:iam::ACCOUNT:role/NAME)", c.AssumeRoleARN))
	}
	if c.DescribeRate < 0 || c.DescribeRate > maxDescribeRate {
		errs = append(errs, adapters.Fieldf("describe_rate", "must be between 0 and %d calls per second", maxDescribeRate))
	}
	if c.SubmitRate < 0 || c.SubmitRate > maxSubmitRate {
		errs = append(errs, adapters.Fieldf("submit_rate", "must be between 0 and %d calls per second (Batch's SubmitJob quota)", maxSubmitRate))
	}
	if c.DescribeInterval != 0 && (c.DescribeInterval < minDescribeInterval || c.DescribeInterval > maxDescribeInterval) {
		errs = append(errs, adapters.Fieldf("describe_interval", "must be between %v and %v", minDescribeInterval, maxDescribeInterval))
	}
	if c.Timeout < 0 || c.Timeout > maxTimeout {
		errs = append(errs, adapters.Fieldf("timeout", "must be between 0s and %v", maxTimeout))
	}
	if c.ListingLag != 0 && (c.ListingLag < minListingLag || c.ListingLag > maxListingLag) {
		errs = append(errs, adapters.Fieldf("listing_lag", "must be between %v and %v (default %v): until it has passed since a submission, not finding the job proves nothing", minListingLag, maxListingLag, defaultListingLag))
	}
	if c.ConsoleURL != "" {
		if err := checkConsoleURL(c.ConsoleURL); err != nil {
			errs = append(errs, adapters.Fieldf("console_url", "%v", err))
		}
	}
	if c.Events != nil {
		errs = append(errs, c.Events.validate("events.")...)
	}
	return errors.Join(errs...)
}

// Validate reports every problem in the events block, joined, each as an
// [adapters.FieldError] whose path is relative to the block. It checks the
// form of api_key (one ${NAME} or ${file:/path} reference), not the key
// itself, which [New] reads; its errors never quote a key. It may be called
// before or after SetDefaults.
func (c *EventsConfig) Validate() error { return errors.Join(c.validate("")...) }

func (c *EventsConfig) validate(prefix string) []error {
	var errs []error
	field := func(path, format string, args ...any) {
		errs = append(errs, adapters.Fieldf(prefix+path, format, args...))
	}
	switch h := c.APIKeyHeader; {
	case h == "":
		field("api_key_header", "required: the header name of the EventBridge connection's API key (e.g. X-Jobbridge-Key)")
	case !isHeaderName(h):
		field("api_key_header", "%q is not an HTTP header name", h)
	case slices.Contains(eventBridgeHeaders, http.CanonicalHeaderKey(h)):
		field("api_key_header", "%s is a header EventBridge sets itself; choose a name of your own such as X-Jobbridge-Key", http.CanonicalHeaderKey(h))
	}
	if c.APIKey == "" {
		field("api_key", "required: a ${NAME} or ${file:/path} reference to the API key's value (without it anyone could send job events)")
	} else if _, err := parseKeyRef(c.APIKey); err != nil {
		field("api_key", "%v", err)
	}
	if c.MaxAge != 0 && (c.MaxAge < minEventsMaxAge || c.MaxAge > maxEventsMaxAge) {
		field("max_age", "must be between %v and %v (default %v, EventBridge's longest retry window)", minEventsMaxAge, maxEventsMaxAge, defaultEventsMaxAge)
	}
	if c.PollInterval != 0 && (c.PollInterval < minEventsPoll || c.PollInterval > maxEventsPoll) {
		field("poll_interval", "must be between %v and %v (default %v)", minEventsPoll, maxEventsPoll, defaultEventsPoll)
	}
	if c.Quiet != 0 && (c.Quiet < minEventsQuiet || c.Quiet > maxEventsQuiet) {
		field("quiet", "must be between %v and %v (default %v)", minEventsQuiet, maxEventsQuiet, defaultEventsQuiet)
	}
	return errs
}

// eventBridgeHeaders are the headers an API destination sets on every
// request itself, besides its connection's credential.
var eventBridgeHeaders = []string{"Accept-Encoding", "Connection", "Content-Length", "Content-Type", "Host", "Range", "Transfer-Encoding", "User-Agent"}

// isHeaderName reports whether s is an HTTP field name (an RFC 9110 token).
func isHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// parseKeyRef parses api_key: exactly one ${NAME} or ${file:/path}
// reference. Its errors never quote the value, which may be a key written
// in by mistake.
func parseKeyRef(s string) (expr.SecretRef, error) {
	t, err := expr.ParseTemplate(strings.TrimSpace(s), expr.Scope{Secrets: true})
	if err == nil {
		if segs := t.Segments(); len(segs) == 1 && segs[0].Secret != nil {
			return *segs[0].Secret, nil
		}
	}
	return expr.SecretRef{}, errors.New("must be a single ${NAME} (an environment variable) or ${file:/absolute/path} reference, not the key itself")
}

func checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("must be an absolute http:// or https:// URL")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("has no host")
	case u.User != nil:
		return errors.New("must not carry credentials")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return errors.New("must not have a query or fragment")
	}
	return nil
}

func checkConsoleURL(raw string) error {
	if !strings.HasPrefix(raw, "https://") && !strings.HasPrefix(raw, "http://") {
		return errors.New("must start with https:// or http://")
	}
	if strings.ContainsAny(raw, " \t\r\n") {
		return errors.New("must not contain whitespace")
	}
	for _, seg := range parseConsoleLink(raw) {
		if seg.ph != "" && seg.ph != phRegion && seg.ph != phJobID {
			return fmt.Errorf("unknown placeholder {%s} (use {region} and {job_id})", seg.ph)
		}
	}
	return nil
}

// SetDefaults does nothing yet; it exists so that every job block is handled
// alike (decode, SetDefaults, Validate). The job name defaults to the tool's
// name when the adapter is built.
func (c *JobConfig) SetDefaults() {}

// Validate reports every problem in the job block, joined, each as an
// [adapters.FieldError] whose path is relative to the block (for example
// "container_overrides.vcpus" or "depends_on[0].type"); a template's
// mistake carries the 1-based byte Offset of it in the field's value. It may
// be called before or after SetDefaults. It does not check {args.NAME}
// against the tool's input schema; see [JobConfig.ArgNames].
func (c *JobConfig) Validate() error {
	var errs []error
	add := func(e error) {
		if e != nil {
			errs = append(errs, e)
		}
	}
	add(checkFixed("job_queue", c.JobQueue, queueRE, "a job queue name or ARN"))
	add(checkFixed("job_definition", c.JobDefinition, definitionRE, "a job definition name, name:revision or ARN"))
	add(checkTemplate("job_name", c.JobName))
	for _, k := range sortedKeys(c.Parameters) {
		if k == "" {
			add(adapters.Fieldf("parameters", "empty parameter name"))
		}
		add(checkTemplate("parameters."+k, c.Parameters[k]))
	}
	if o := c.ContainerOverrides; o != nil {
		for i, arg := range o.Command {
			add(checkTemplate(fmt.Sprintf("container_overrides.command[%d]", i), arg))
		}
		for _, k := range sortedKeys(o.Environment) {
			path := "container_overrides.environment." + k
			switch {
			case !envNameRE.MatchString(k):
				add(adapters.Fieldf(path, "%q is not an environment variable name", k))
			case strings.HasPrefix(strings.ToUpper(k), "AWS_BATCH"):
				add(adapters.Fieldf(path, "names starting with AWS_BATCH are reserved by Batch"))
			}
			add(checkTemplate(path, o.Environment[k]))
		}
		add(checkNumber("container_overrides.vcpus", o.VCPUs, numPositive))
		add(checkNumber("container_overrides.memory", o.Memory, intPositive))
		add(checkNumber("container_overrides.gpus", o.GPUs, intNonNegative))
	}
	add(checkNumber("array_size", c.ArraySize, arraySize))
	if len(c.DependsOn) > maxDependencies {
		add(adapters.Fieldf("depends_on", "at most %d dependencies", maxDependencies))
	}
	for i, d := range c.DependsOn {
		path := fmt.Sprintf("depends_on[%d]", i)
		if d.JobID == "" {
			add(adapters.Fieldf(path+".job_id", "required"))
		}
		add(checkTemplate(path+".job_id", d.JobID))
		if d.Type != "" && d.Type != "N_TO_N" && d.Type != "SEQUENTIAL" {
			add(adapters.Fieldf(path+".type", "%q is not N_TO_N or SEQUENTIAL (leave it out for a plain dependency)", d.Type))
		}
	}
	if c.RetryAttempts < 0 || c.RetryAttempts > maxRetryAttempts {
		add(adapters.Fieldf("retry_attempts", "must be between 1 and %d (0 keeps the job definition's)", maxRetryAttempts))
	}
	if c.TimeoutSeconds != 0 && c.TimeoutSeconds < minTimeout {
		add(adapters.Fieldf("timeout_seconds", "must be at least %d (Batch's minimum; 0 keeps the job definition's)", minTimeout))
	}
	if len(c.Tags) > maxUserTags {
		add(adapters.Fieldf("tags", "at most %d tags (Batch allows 50 and the adapter adds %s)", maxUserTags, tagCorrelation))
	}
	for _, k := range sortedKeys(c.Tags) {
		path := "tags." + k
		lower := strings.ToLower(k)
		switch {
		case k == "" || len(k) > maxTagKey:
			add(adapters.Fieldf(path, "tag keys must be 1 to %d characters", maxTagKey))
		case strings.HasPrefix(lower, "aws:"):
			add(adapters.Fieldf(path, "tag keys starting with aws: are reserved by AWS"))
		case strings.HasPrefix(lower, "jobbridge:"):
			add(adapters.Fieldf(path, "tag keys starting with jobbridge: are reserved by the adapter"))
		}
		if len(c.Tags[k]) > maxTagValue {
			add(adapters.Fieldf(path, "tag values must be at most %d characters", maxTagValue))
		}
		add(checkTemplate(path, c.Tags[k]))
	}
	add(checkTemplate("share_identifier", c.ShareIdentifier))
	if p := c.SchedulingPriority; p != nil && (*p < 0 || *p > maxPriority) {
		add(adapters.Fieldf("scheduling_priority", "must be between 0 and %d", maxPriority))
	}
	return errors.Join(errs...)
}

// ArgNames returns the sorted names of the arguments the job block's
// templates read, as {args.NAME} placeholders and in expressions (args.NAME,
// args["NAME"]), so that the catalog can check them against the tool's input
// schema. An expression that reads arguments by computed names (args[k],
// args.map(...)) may read others as well: those cannot be known before a
// call and are not listed. Templates that do not parse are skipped
// (Validate reports them).
func (c *JobConfig) ArgNames() []string {
	seen := map[string]bool{}
	for _, s := range c.templates() {
		t, err := expr.ParseTemplate(s, scope)
		if err != nil {
			continue
		}
		names, _ := t.ArgNames()
		for _, n := range names {
			seen[n] = true
		}
	}
	return sortedKeys(seen)
}

// templates lists every templated string of the block.
func (c *JobConfig) templates() []string {
	ts := []string{c.JobName, c.ArraySize, c.ShareIdentifier}
	for _, v := range c.Parameters {
		ts = append(ts, v)
	}
	if o := c.ContainerOverrides; o != nil {
		ts = append(ts, o.Command...)
		for _, v := range o.Environment {
			ts = append(ts, v)
		}
		ts = append(ts, o.VCPUs, o.Memory, o.GPUs)
	}
	for _, d := range c.DependsOn {
		ts = append(ts, d.JobID)
	}
	for _, v := range c.Tags {
		ts = append(ts, v)
	}
	return ts
}

// checkFixed checks a required value that takes no placeholders.
func checkFixed(path, v string, re *regexp.Regexp, what string) error {
	switch {
	case v == "":
		return adapters.Fieldf(path, "required")
	case !isLiteral(v):
		return adapters.Fieldf(path, "takes no placeholders: it is fixed per tool")
	case !re.MatchString(v):
		return adapters.Fieldf(path, "%q is not %s", v, what)
	}
	return nil
}

// isLiteral reports whether v is plain text: no placeholder or expression,
// known or not.
func isLiteral(v string) bool {
	t, err := expr.ParseTemplate(v, expr.Scope{Vars: expr.AllVars})
	if err != nil {
		return false
	}
	_, ok := t.Literal()
	return ok
}

func checkTemplate(path, v string) error {
	_, err := parseField(path, v)
	return err
}

// numberKind says what a numeric field accepts.
type numberKind int

const (
	numPositive    numberKind = iota // a number > 0
	intPositive                      // an integer > 0
	intNonNegative                   // an integer >= 0
	arraySize                        // 0, 1 or 2..10,000
)

// checkNumber checks a numeric field that may also be a template: a literal
// must be in range; a template is checked when it is rendered.
func checkNumber(path, v string, kind numberKind) error {
	if v == "" {
		return nil
	}
	t, err := parseField(path, v)
	if err != nil {
		return err
	}
	if _, literal := t.Literal(); !literal {
		return nil
	}
	if _, err := parseNumber(v, kind); err != nil {
		return adapters.Fieldf(path, "%v", err)
	}
	return nil
}

// parseNumber parses a rendered numeric field. It returns the canonical text
// Batch is sent.
func parseNumber(v string, kind numberKind) (string, error) {
	v = strings.TrimSpace(v)
	if kind == numPositive {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1e6 {
			return "", fmt.Errorf("%q is not a positive number", v)
		}
		return strconv.FormatFloat(f, 'f', -1, 64), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return "", fmt.Errorf("%q is not an integer", v)
	}
	switch kind {
	case intPositive:
		if n <= 0 {
			return "", fmt.Errorf("%d is not positive", n)
		}
	case intNonNegative:
		if n < 0 {
			return "", fmt.Errorf("%d is negative", n)
		}
	case arraySize:
		if n < 0 || n > maxArraySize {
			return "", fmt.Errorf("%d is not an array size between 2 and %d (0 or 1 for a single job)", n, maxArraySize)
		}
	}
	return strconv.Itoa(n), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
