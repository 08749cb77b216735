package githubactions

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/expr"
)

// BackendConfig is a `type: github_actions` backend in the catalog: which
// GitHub API to talk to, with which credentials and how many requests an hour
// it may spend. Every tool on the backend shares it.
//
//	backends:
//	  github:
//	    type: github_actions
//	    token: ${GITHUB_TOKEN}
//	    requests_per_hour: 4000
//	    events:                      # optional: GitHub's webhooks push run changes
//	      secret: ${GITHUB_WEBHOOK_SECRET}
type BackendConfig struct {
	// APIURL is the REST API base. Empty: GitHub.com's public API. For
	// GitHub Enterprise Server it is https://HOST/api/v3.
	APIURL string `yaml:"api_url"`
	// Token is a ${NAME} reference to an environment variable holding a
	// personal access token or another bearer token. It is expanded when the
	// server starts and never logged or echoed in errors.
	Token string `yaml:"token"`
	// App authenticates as a GitHub App installation instead of Token.
	App *AppConfig `yaml:"app"`
	// RequestsPerHour is the adapter's budget of requests that count
	// against GitHub's primary rate limit (answers 304 do not). Default
	// 5000.
	RequestsPerHour int `yaml:"requests_per_hour"`
	// DispatchRunDetails asks the dispatch for the run's ID
	// (return_run_details). Default true. Set false for GitHub Enterprise
	// Server 3.20 and older, which refuse it; tools then need a
	// correlation_input. With true, a server that refuses it is detected
	// and the backend falls back on its own.
	DispatchRunDetails *bool `yaml:"dispatch_run_details"`
	// APIVersion is sent as X-GitHub-Api-Version. Default "2022-11-28".
	APIVersion string `yaml:"api_version"`
	// Timeout bounds each HTTP request. Default 10s.
	Timeout time.Duration `yaml:"timeout"`
	// ListingLag is how long after a dispatch GitHub's run listing may
	// still not show the run. Until it has passed, a search for a run
	// whose dispatch had an unknown outcome that finds nothing proves
	// nothing: the bridge searches again later instead of concluding that
	// no run was created. Default 60s; at most 24h.
	ListingLag time.Duration `yaml:"listing_lag"`
	// Events, when set, has the bridge receive GitHub's workflow_run and
	// workflow_job webhook deliveries for this backend (see
	// [Adapter.ReadEvents]).
	Events *EventsConfig `yaml:"events"`
}

// EventsConfig is the backend's `events:` block: GitHub sends workflow_run
// and workflow_job webhooks (a repository or organization webhook, or a
// GitHub App's) to the bridge's endpoint for the backend, signed with a
// shared secret, and the bridge polls the runs that receive them only
// every poll_interval, as a safety net for a lost delivery.
//
//	events:
//	  secret: ${GITHUB_WEBHOOK_SECRET}   # or ${file:/run/secrets/github-webhook}
//	  poll_interval: 10m
//	  quiet: 30m
type EventsConfig struct {
	// Secret is the webhook's secret, as a ${NAME} reference to an
	// environment variable or a ${file:/absolute/path} reference to a file
	// (one line; its trailing newline is not part of it), read once when
	// the server starts. Required: without it anyone could forge events.
	// It is never logged or echoed in errors.
	Secret string `yaml:"secret"`
	// PollInterval is how often a run that has received an event is still
	// polled while events flow. Default 10m; at most 24h.
	PollInterval time.Duration `yaml:"poll_interval"`
	// Quiet is how long the backend may send no event at all before the
	// bridge polls every run at its tool's refresh interval again.
	// Default 30m.
	Quiet time.Duration `yaml:"quiet"`
}

// AppConfig is GitHub App authentication: a JWT signed with the app's
// private key is exchanged for an installation token, renewed five minutes
// before it expires.
//
//	app: {app_id: 12345, installation_id: 67890, private_key_file: /etc/jobbridge/app.pem}
type AppConfig struct {
	// AppID is the app's numeric ID (the JWT's issuer).
	AppID int64 `yaml:"app_id"`
	// InstallationID is the app's installation on the account that owns
	// the repositories.
	InstallationID int64 `yaml:"installation_id"`
	// PrivateKeyFile is the path of the app's RSA private key in PEM
	// (PKCS#1 or PKCS#8), read once when the server starts.
	PrivateKeyFile string `yaml:"private_key_file"`
}

// JobConfig is a tool's `job:` block on a github_actions backend: which
// workflow to dispatch and how the tool's arguments become its inputs.
//
// Templates: ref and input values are templates of package
// [github.com/jobbridge/jobbridge/adapters/expr]. They may contain
// {args.NAME} (a tool argument) and {= EXPR}, a CEL expression over args such
// as {= args.env == "prod" ? "main" : args.branch} or
// {= shell_quote(args.cmd)}; input values may also use correlation_id. A
// workflow expression such as ${{ inputs.x }} is text and passes through.
// An input whose value is exactly one placeholder of an argument the caller
// left out (or one expression giving null) is not sent, so the workflow's
// default applies. Non-string values are sent as text: numbers in their
// shortest form, booleans as true/false, lists and maps as JSON
// (workflow_dispatch inputs are strings).
type JobConfig struct {
	// Owner is the account (user or organization) that owns the
	// repository.
	Owner string `yaml:"owner"`
	// Repo is the repository's name.
	Repo string `yaml:"repo"`
	// Workflow is the workflow's file name (deploy.yml) or numeric ID.
	Workflow string `yaml:"workflow"`
	// Ref is the branch or tag to run on (a template).
	Ref string `yaml:"ref"`
	// Inputs maps workflow input names to templates; at most 25 together
	// with the correlation input.
	Inputs map[string]string `yaml:"inputs"`
	// CorrelationInput names a workflow input that receives the correlation
	// ID. The workflow must echo it in its run-name (for example
	// `run-name: Deploy [${{ inputs.correlation_id }}]`); the adapter then
	// finds the run by its title when the dispatch does not return the run
	// ID (GitHub Enterprise Server 3.20 and older) or its outcome is
	// unknown.
	CorrelationInput string `yaml:"correlation_input"`
	// Approvals lets a run that waits for a deployment review become
	// input_required, when this token may approve it: the user's answer
	// approves or rejects the deployment. Off: such a run stays working and
	// names who must approve.
	Approvals bool `yaml:"approvals"`
	// ForceCancelAfter is how long a cancelled run may keep running before
	// the adapter force-cancels it, once. Default 2m.
	ForceCancelAfter time.Duration `yaml:"force_cancel_after"`
	// LogTailLines is how many last lines of each failed job's log a failed
	// run's result carries. Default 200; 0 sends none.
	LogTailLines *int `yaml:"log_tail_lines"`
}

// Defaults applied by SetDefaults.
const (
	DefaultRequestsPerHour  = 5000
	DefaultAPIVersion       = "2022-11-28"
	DefaultTimeout          = 10 * time.Second
	DefaultForceCancelAfter = 2 * time.Minute
	DefaultLogTailLines     = 200
	DefaultListingLag       = 60 * time.Second
	DefaultEventsInterval   = 10 * time.Minute
	DefaultEventsQuiet      = 30 * time.Minute
)

// Limits checked by Validate.
const (
	maxInputs          = 25
	maxLogTailLines    = 5000
	maxRequestsPerHour = 1_000_000
	maxListingLag      = 24 * time.Hour
	maxEventsInterval  = 24 * time.Hour
)

// apiVersions are the REST API versions go-github v93 supports.
var apiVersions = []string{"2022-11-28", "2026-03-10"}

// SetDefaults fills the fields the operator left out.
func (c *BackendConfig) SetDefaults() {
	if c.RequestsPerHour == 0 {
		c.RequestsPerHour = DefaultRequestsPerHour
	}
	if c.DispatchRunDetails == nil {
		v := true
		c.DispatchRunDetails = &v
	}
	if c.APIVersion == "" {
		c.APIVersion = DefaultAPIVersion
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.ListingLag == 0 {
		c.ListingLag = DefaultListingLag
	}
	if e := c.Events; e != nil {
		if e.PollInterval == 0 {
			e.PollInterval = DefaultEventsInterval
		}
		if e.Quiet == 0 {
			e.Quiet = DefaultEventsQuiet
		}
	}
}

// Validate reports every problem in the backend block, joined, each as an
// [adapters.FieldError] whose path is relative to the block. The token is a
// secret: its errors never quote it.
func (c *BackendConfig) Validate() error {
	var errs []error
	if c.APIURL != "" {
		if err := checkAPIURL(c.APIURL); err != nil {
			errs = append(errs, adapters.Fieldf("api_url", "%v", err))
		}
	}
	switch {
	case c.Token == "" && c.App == nil:
		errs = append(errs, adapters.Fieldf("token", "required (or app): a ${NAME} reference to the token's environment variable"))
	case c.Token != "" && c.App != nil:
		errs = append(errs, adapters.Fieldf("app", "set token or app, not both"))
	case c.Token != "":
		if _, ok := envRef(c.Token); !ok {
			errs = append(errs, adapters.Fieldf("token", "must be a single ${NAME} reference to an environment variable, not the token itself"))
		}
	}
	if a := c.App; a != nil {
		if a.AppID <= 0 {
			errs = append(errs, adapters.Fieldf("app.app_id", "required: a positive number"))
		}
		if a.InstallationID <= 0 {
			errs = append(errs, adapters.Fieldf("app.installation_id", "required: a positive number"))
		}
		if a.PrivateKeyFile == "" {
			errs = append(errs, adapters.Fieldf("app.private_key_file", "required: the path of the app's PEM private key"))
		}
	}
	if c.RequestsPerHour < 0 || c.RequestsPerHour > maxRequestsPerHour {
		errs = append(errs, adapters.Fieldf("requests_per_hour", "must be between 1 and %d", maxRequestsPerHour))
	}
	if c.APIVersion != "" && !slices.Contains(apiVersions, c.APIVersion) {
		errs = append(errs, adapters.Fieldf("api_version", "%q is not a supported REST API version (%s)", c.APIVersion, strings.Join(apiVersions, ", ")))
	}
	if c.Timeout < 0 {
		errs = append(errs, adapters.Fieldf("timeout", "must not be negative"))
	}
	if c.ListingLag < 0 || c.ListingLag > maxListingLag {
		errs = append(errs, adapters.Fieldf("listing_lag", "must not be negative, and at most %v", maxListingLag))
	}
	if e := c.Events; e != nil {
		if e.Secret == "" {
			errs = append(errs, adapters.Fieldf("events.secret", "required: a ${NAME} or ${file:/path} reference to the webhook's secret (without it anyone could forge events)"))
		} else if _, err := secretRef(e.Secret); err != nil {
			errs = append(errs, adapters.Fieldf("events.secret", "%v", err))
		}
		if e.PollInterval < 0 || e.PollInterval > maxEventsInterval {
			errs = append(errs, adapters.Fieldf("events.poll_interval", "must not be negative, and at most %v", maxEventsInterval))
		}
		if e.Quiet < 0 {
			errs = append(errs, adapters.Fieldf("events.quiet", "must not be negative"))
		}
	}
	return errors.Join(errs...)
}

// secretRef reads a secret reference: exactly one ${NAME} or
// ${file:/absolute/path}. Its errors never quote s, which may be the
// secret itself written in by mistake.
func secretRef(s string) (expr.SecretRef, error) {
	const want = "must be a single ${NAME} or ${file:/absolute/path} reference, not the secret itself"
	s = strings.TrimSpace(s)
	if path, ok := strings.CutPrefix(s, "${file:"); ok && strings.HasSuffix(path, "}") && !strings.HasPrefix(path, "/") {
		return expr.SecretRef{}, errors.New("a ${file:PATH} reference needs an absolute path")
	}
	t, err := expr.ParseTemplate(s, expr.Scope{Secrets: true})
	if err != nil {
		return expr.SecretRef{}, errors.New(want)
	}
	segs := t.Segments()
	if len(segs) != 1 || segs[0].Secret == nil {
		return expr.SecretRef{}, errors.New(want)
	}
	return *segs[0].Secret, nil
}

// SetDefaults fills the fields the operator left out.
func (c *JobConfig) SetDefaults() {
	if c.ForceCancelAfter == 0 {
		c.ForceCancelAfter = DefaultForceCancelAfter
	}
	if c.LogTailLines == nil {
		n := DefaultLogTailLines
		c.LogTailLines = &n
	}
}

// Validate reports every problem in the job block, joined, each as an
// [adapters.FieldError] whose path is relative to the block; a template's
// mistake carries the 1-based byte Offset of it in the field's value.
func (c *JobConfig) Validate() error {
	var errs []error
	for _, f := range []struct{ path, v string }{{"owner", c.Owner}, {"repo", c.Repo}} {
		if err := checkName(f.v); err != nil {
			errs = append(errs, adapters.Fieldf(f.path, "%v", err))
		}
	}
	if err := checkWorkflow(c.Workflow); err != nil {
		errs = append(errs, adapters.Fieldf("workflow", "%v", err))
	}
	if strings.TrimSpace(c.Ref) == "" {
		errs = append(errs, adapters.Fieldf("ref", "required: the branch or tag to run the workflow on"))
	} else if _, err := parseField("ref", c.Ref, refScope); err != nil {
		errs = append(errs, err)
	}
	n := len(c.Inputs)
	if c.CorrelationInput != "" {
		n++
		if !validInputName(c.CorrelationInput) {
			errs = append(errs, adapters.Fieldf("correlation_input", "%q is not a valid workflow input name", c.CorrelationInput))
		}
		if _, ok := c.Inputs[c.CorrelationInput]; ok {
			errs = append(errs, adapters.Fieldf("inputs."+c.CorrelationInput, "is the correlation_input, which the adapter fills; remove it here"))
		}
	}
	if n > maxInputs {
		errs = append(errs, adapters.Fieldf("inputs", "%d inputs (correlation input included); a workflow_dispatch takes at most %d", n, maxInputs))
	}
	for _, name := range sortedKeys(c.Inputs) {
		if !validInputName(name) {
			errs = append(errs, adapters.Fieldf("inputs."+name, "%q is not a valid workflow input name", name))
		}
		if _, err := parseField("inputs."+name, c.Inputs[name], inputScope); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ForceCancelAfter < 0 {
		errs = append(errs, adapters.Fieldf("force_cancel_after", "must not be negative"))
	}
	if c.LogTailLines != nil && (*c.LogTailLines < 0 || *c.LogTailLines > maxLogTailLines) {
		errs = append(errs, adapters.Fieldf("log_tail_lines", "must be between 0 and %d", maxLogTailLines))
	}
	return errors.Join(errs...)
}

// ArgNames lists the tool arguments the job's templates read, sorted, as
// {args.NAME} placeholders and in expressions (args.NAME, args["NAME"]), so
// that the catalog can check them against the tool's input schema. An
// expression that reads arguments by computed names (args[k],
// args.map(...)) may read others as well: those cannot be known before a
// call and are not listed. Templates that do not parse are skipped
// (Validate reports them).
func (c *JobConfig) ArgNames() []string {
	seen := map[string]bool{}
	add := func(s string, scope expr.Scope) {
		t, err := expr.ParseTemplate(s, scope)
		if err != nil {
			return
		}
		names, _ := t.ArgNames()
		for _, n := range names {
			seen[n] = true
		}
	}
	add(c.Ref, refScope)
	for _, v := range c.Inputs {
		add(v, inputScope)
	}
	return sortedKeys(seen)
}

func checkAPIURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("must be an absolute http:// or https:// URL")
	case u.Hostname() == "":
		return errors.New("has no host")
	case u.User != nil:
		return errors.New("must not carry credentials; use token or app")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return errors.New("must not have a query or fragment")
	}
	return nil
}

// checkName checks an owner or repository name.
func checkName(s string) error {
	switch {
	case s == "":
		return errors.New("required")
	case s == "." || s == "..":
		return fmt.Errorf("%q is not a valid name", s)
	case len(s) > 100:
		return errors.New("longer than 100 characters")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("%q contains %q; names use letters, digits, '-', '_' and '.'", s, r)
		}
	}
	return nil
}

// checkWorkflow checks a workflow file name or numeric ID.
func checkWorkflow(s string) error {
	if s == "" {
		return errors.New("required: the workflow's file name (deploy.yml) or numeric ID")
	}
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") || s == "0" {
			return errors.New("a numeric workflow ID must be positive")
		}
		return nil
	}
	if !strings.HasSuffix(s, ".yml") && !strings.HasSuffix(s, ".yaml") {
		return fmt.Errorf("%q is neither a numeric ID nor a .yml or .yaml file name", s)
	}
	if strings.ContainsAny(s, "/\\") || checkName(s) != nil {
		return fmt.Errorf("%q must be a bare file name from .github/workflows", s)
	}
	return nil
}

// validInputName reports whether s is a workflow input name.
func validInputName(s string) bool {
	if s == "" || len(s) > 100 || !(s[0] == '_' || s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
