package githubactions

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/expr"
)

// fieldErrors flattens a joined Validate error into "path: message" lines.
func fieldErrors(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var out []string
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var fe *adapters.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("not a FieldError: %v", err)
			return
		}
		out = append(out, fe.Error())
	}
	walk(err)
	return out
}

func TestBackendConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  BackendConfig
		want []string
	}{
		{name: "token", cfg: BackendConfig{Token: "${GITHUB_TOKEN}"}},
		{name: "enterprise", cfg: BackendConfig{APIURL: "https://ghe.internal/api/v3", Token: "${T}", DispatchRunDetails: new(false), APIVersion: "2026-03-10", RequestsPerHour: 15000}},
		{name: "app", cfg: BackendConfig{App: &AppConfig{AppID: 1, InstallationID: 2, PrivateKeyFile: "/etc/app.pem"}}},
		{name: "nothing", cfg: BackendConfig{}, want: []string{"token: required (or app): a ${NAME} reference to the token's environment variable"}},
		{name: "literal token", cfg: BackendConfig{Token: "ghp_abc"}, want: []string{"token: must be a single ${NAME} reference to an environment variable, not the token itself"}},
		{name: "token with text", cfg: BackendConfig{Token: "Bearer ${T}"}, want: []string{"token: must be a single ${NAME} reference to an environment variable, not the token itself"}},
		{name: "both", cfg: BackendConfig{Token: "${T}", App: &AppConfig{AppID: 1, InstallationID: 2, PrivateKeyFile: "k"}}, want: []string{"app: set token or app, not both"}},
		{name: "empty app", cfg: BackendConfig{App: &AppConfig{}}, want: []string{
			"app.app_id: required: a positive number", "app.installation_id: required: a positive number",
			"app.private_key_file: required: the path of the app's PEM private key"}},
		{name: "bad values", cfg: BackendConfig{APIURL: "ftp://x", Token: "${T}", RequestsPerHour: -1, APIVersion: "2024-01-01", Timeout: -time.Second}, want: []string{
			"api_url: must be an absolute http:// or https:// URL",
			"requests_per_hour: must be between 1 and 1000000",
			`api_version: "2024-01-01" is not a supported REST API version (2022-11-28, 2026-03-10)`,
			"timeout: must not be negative"}},
		{name: "url with credentials", cfg: BackendConfig{APIURL: "https://user:pw@ghe.internal/api/v3", Token: "${T}"}, want: []string{"api_url: must not carry credentials; use token or app"}},
		{name: "url with query", cfg: BackendConfig{APIURL: "https://ghe.internal/api/v3?x=1", Token: "${T}"}, want: []string{"api_url: must not have a query or fragment"}},
		{name: "events", cfg: BackendConfig{Token: "${T}", Events: &EventsConfig{Secret: "${GITHUB_WEBHOOK_SECRET}", PollInterval: 5 * time.Minute, Quiet: time.Hour}}},
		{name: "events secret in a file", cfg: BackendConfig{Token: "${T}", Events: &EventsConfig{Secret: "${file:/run/secrets/github-webhook}"}}},
		{name: "events without a secret", cfg: BackendConfig{Token: "${T}", Events: &EventsConfig{}}, want: []string{
			"events.secret: required: a ${NAME} or ${file:/path} reference to the webhook's secret (without it anyone could forge events)"}},
		{name: "events with the secret written in", cfg: BackendConfig{Token: "${T}", Events: &EventsConfig{Secret: "hunter2-webhook"}}, want: []string{
			"events.secret: must be a single ${NAME} or ${file:/absolute/path} reference, not the secret itself"}},
		{name: "events secret with text around", cfg: BackendConfig{Token: "${T}", Events: &EventsConfig{Secret: "x${S}"}}, want: []string{
			"events.secret: must be a single ${NAME} or ${file:/absolute/path} reference, not the secret itself"}},
		{name: "events secret in a relative file", cfg: BackendConfig{Token: "${T}", Events: &EventsConfig{Secret: "${file:secrets/hook}"}}, want: []string{
			"events.secret: a ${file:PATH} reference needs an absolute path"}},
		{name: "events bad durations", cfg: BackendConfig{Token: "${T}", Events: &EventsConfig{Secret: "${S}", PollInterval: 25 * time.Hour, Quiet: -time.Second}}, want: []string{
			"events.poll_interval: must not be negative, and at most 24h0m0s", "events.quiet: must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, fieldErrors(t, tt.cfg.Validate())); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBackendConfigDefaults(t *testing.T) {
	var c BackendConfig
	c.SetDefaults()
	want := BackendConfig{RequestsPerHour: 5000, DispatchRunDetails: new(true), APIVersion: "2022-11-28", Timeout: 10 * time.Second, ListingLag: time.Minute}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("SetDefaults (-want +got):\n%s", diff)
	}
}

// TestEventsConfigDefaults: an events: block polls its runs every 10m
// and falls back to the tools' intervals after 30m without an event; no
// block stays none.
func TestEventsConfigDefaults(t *testing.T) {
	c := BackendConfig{Token: "${T}", Events: &EventsConfig{Secret: "${S}"}}
	c.SetDefaults()
	if diff := cmp.Diff(&EventsConfig{Secret: "${S}", PollInterval: 10 * time.Minute, Quiet: 30 * time.Minute}, c.Events); diff != "" {
		t.Errorf("SetDefaults (-want +got):\n%s", diff)
	}
	var none BackendConfig
	none.SetDefaults()
	if none.Events != nil {
		t.Errorf("SetDefaults made an events: block: %+v", none.Events)
	}
}

func validJob() JobConfig {
	return JobConfig{Owner: "octo-org", Repo: "app", Workflow: "deploy.yml", Ref: "main"}
}

func TestJobConfigValidate(t *testing.T) {
	many := map[string]string{}
	for i := range 25 {
		many["in"+strings.Repeat("x", i)] = "v"
	}
	tests := []struct {
		name string
		edit func(*JobConfig)
		want []string
	}{
		{name: "minimal", edit: func(*JobConfig) {}},
		{name: "everything", edit: func(c *JobConfig) {
			c.Workflow, c.Ref = "161335", "release/{args.version}"
			c.Inputs = map[string]string{"version": "{args.version}", "note": "deploy {args.version} for {correlation_id}"}
			c.CorrelationInput, c.Approvals, c.ForceCancelAfter, c.LogTailLines = "correlation_id", true, time.Minute, new(0)
		}},
		{name: "missing", edit: func(c *JobConfig) { *c = JobConfig{} }, want: []string{
			"owner: required", "repo: required",
			"workflow: required: the workflow's file name (deploy.yml) or numeric ID",
			"ref: required: the branch or tag to run the workflow on"}},
		{name: "bad names", edit: func(c *JobConfig) { c.Owner, c.Repo, c.Workflow = "octo org", "..", ".github/workflows/deploy.yml" }, want: []string{
			`owner: "octo org" contains ' '; names use letters, digits, '-', '_' and '.'`,
			`repo: ".." is not a valid name`,
			`workflow: ".github/workflows/deploy.yml" must be a bare file name from .github/workflows`}},
		{name: "not a workflow", edit: func(c *JobConfig) { c.Workflow = "deploy" }, want: []string{`workflow: "deploy" is neither a numeric ID nor a .yml or .yaml file name`}},
		{name: "zero ID", edit: func(c *JobConfig) { c.Workflow = "0" }, want: []string{"workflow: a numeric workflow ID must be positive"}},
		{name: "placeholders", edit: func(c *JobConfig) {
			c.Ref = "{correlation_id}"
			c.Inputs = map[string]string{"a": "{job.id}", "b": "{args.x.y}"}
		}, want: []string{
			"ref: placeholder {correlation_id} cannot be filled here: the ref names a branch or tag; only inputs may carry the correlation ID",
			"inputs.a: unknown placeholder {job.id} (known here: {args.NAME}, {correlation_id})",
			"inputs.b: placeholder {args.x.y} has an invalid argument name"}},
		{name: "misspelt placeholders", edit: func(c *JobConfig) {
			c.Ref = "{arg.branch}"
			c.Inputs = map[string]string{"a": "for {corelation_id}"}
		}, want: []string{
			"ref: unknown placeholder {arg.branch} (did you mean {args.branch}?)",
			"inputs.a: unknown placeholder {corelation_id} (did you mean {correlation_id}?)"}},
		{name: "too many inputs", edit: func(c *JobConfig) { c.Inputs, c.CorrelationInput = many, "corr" }, want: []string{
			"inputs: 26 inputs (correlation input included); a workflow_dispatch takes at most 25"}},
		{name: "correlation input clash", edit: func(c *JobConfig) {
			c.CorrelationInput, c.Inputs = "corr", map[string]string{"corr": "x", "9bad": "y"}
		}, want: []string{
			"inputs.corr: is the correlation_input, which the adapter fills; remove it here",
			`inputs.9bad: "9bad" is not a valid workflow input name`}},
		{name: "bad correlation input", edit: func(c *JobConfig) { c.CorrelationInput = "has space" }, want: []string{
			`correlation_input: "has space" is not a valid workflow input name`}},
		{name: "bad numbers", edit: func(c *JobConfig) { c.ForceCancelAfter, c.LogTailLines = -time.Second, new(5001) }, want: []string{
			"force_cancel_after: must not be negative", "log_tail_lines: must be between 0 and 5000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validJob()
			tt.edit(&c)
			got := fieldErrors(t, c.Validate())
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJobConfigDefaultsAndArgNames(t *testing.T) {
	c := validJob()
	c.Ref = "{args.branch}"
	c.Inputs = map[string]string{"v": "{args.version}", "n": "note for {args.branch} ${{ github.actor }}", "c": "{correlation_id}",
		"p": `{= args.env == "prod" ? args["region"] : "none"}`,
		// Reads every argument: only the names it spells out are listed.
		"all": `{= args.exists(k, k == "debug") || has(args.verbose)}`}
	c.SetDefaults()
	if c.ForceCancelAfter != 2*time.Minute || c.LogTailLines == nil || *c.LogTailLines != 200 {
		t.Errorf("SetDefaults: force_cancel_after %v, log_tail_lines %v", c.ForceCancelAfter, c.LogTailLines)
	}
	if diff := cmp.Diff([]string{"branch", "env", "region", "verbose", "version"}, c.ArgNames()); diff != "" {
		t.Errorf("ArgNames (-want +got):\n%s", diff)
	}
}

func TestTemplateRender(t *testing.T) {
	args := map[string]any{"s": "text", "n": 3.5, "i": 3.0, "b": true, "o": map[string]any{"k": 1.0}, "env": "prod"}
	tests := []struct {
		tmpl, want string
		missing    bool
	}{
		{"{args.s}", "text", false},
		{"{args.n}", "3.5", false},
		{"{args.i}", "3", false},
		{"{= args.i + 1}", "4", false},
		{`{= args.env == "prod" ? "high" : "low"}`, "high", false},
		{`{= has(args.absent) ? args.absent : null}`, "", true},
		{`{= shell_quote(args.s + " $(id)")} now`, `'text $(id)' now`, false},
		{"{args.b}", "true", false},
		{"{args.o}", `{"k":1}`, false},
		{"{args.absent}", "", true},
		{"v{args.absent}", "v", false},
		{"{correlation_id}", "corr", false},
		{"${{ inputs.x }} {args.s}", "${{ inputs.x }} text", false},
	}
	for _, tt := range tests {
		tmpl, err := parseField("inputs.x", tt.tmpl, inputScope)
		if err != nil {
			t.Fatalf("parse %q: %v", tt.tmpl, err)
		}
		got, missing, err := tmpl.Render(context.Background(), vars(adapters.StartRequest{Arguments: args, CorrelationID: "corr"}), expr.Raw, nil)
		if err != nil || got != tt.want || missing != tt.missing {
			t.Errorf("render(%q) = %q, missing %v, %v; want %q, %v", tt.tmpl, got, missing, err, tt.want, tt.missing)
		}
	}
	if n := args["i"]; n != 3.0 {
		t.Errorf("rendering changed the caller's arguments: i = %#v", n)
	}
}

func TestTitleCarries(t *testing.T) {
	for _, c := range []struct {
		title, id string
		want      bool
	}{
		{"Deploy [abc-123]", "abc-123", true},
		{"abc-123", "abc-123", true},
		{"Deploy [abc-1234]", "abc-123", false},
		{"Deploy [xabc-123]", "abc-123", false},
		{"Deploy", "abc-123", false},
	} {
		if got := titleCarries(c.title, c.id); got != c.want {
			t.Errorf("titleCarries(%q, %q) = %v", c.title, c.id, got)
		}
	}
}
