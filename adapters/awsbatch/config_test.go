package awsbatch

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/jobbridge/jobbridge/adapters"
)

// fieldErrors flattens a Validate error into "path: message" lines.
func fieldErrors(t *testing.T, err error) []string {
	t.Helper()
	var out []string
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var fe *adapters.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("error %q is not an *adapters.FieldError", err)
			return
		}
		out = append(out, fe.Error())
	}
	walk(err)
	slices.Sort(out)
	return out
}

func TestBackendValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  BackendConfig
		want []string // substrings, one per expected error, sorted by path
	}{
		{"minimal", BackendConfig{Region: "eu-west-1"}, nil},
		{"everything", BackendConfig{
			Region: "us-gov-west-1", Endpoint: "http://127.0.0.1:4566", Profile: "ops",
			AssumeRoleARN: "arn:aws:iam::123456789012:role/jobbridge", DescribeRate: 2.5, SubmitRate: 50,
			DescribeInterval: 5 * time.Second, QueuePosition: true, Timeout: time.Minute, ListingLag: 2 * time.Minute,
			ConsoleURL: "https://console.invalid/batch?region={region}#jobs/detail/{job_id}",
		}, nil},
		{"no region", BackendConfig{}, []string{"region: required"}},
		{"bad region", BackendConfig{Region: "Europe"}, []string{"region: \"Europe\" is not an AWS region name"}},
		{"bad endpoint", BackendConfig{Region: "eu-west-1", Endpoint: "ftp://127.0.0.1:4566"}, []string{"endpoint: must be an absolute"}},
		{"endpoint with credentials", BackendConfig{Region: "eu-west-1", Endpoint: "http://a:b@127.0.0.1"}, []string{"endpoint: must not carry credentials"}},
		{"bad role", BackendConfig{Region: "eu-west-1", AssumeRoleARN: "jobbridge"}, []string{"assume_role_arn: \"jobbridge\" is not an IAM role ARN"}},
		{"rates out of range", BackendConfig{Region: "eu-west-1", DescribeRate: -1, SubmitRate: 51}, []string{
			"describe_rate: must be between 0 and 100", "submit_rate: must be between 0 and 50"}},
		{"interval and timeout out of range", BackendConfig{Region: "eu-west-1", DescribeInterval: time.Millisecond, Timeout: -time.Second}, []string{
			"describe_interval: must be between 10ms and 10m0s", "timeout: must be between 0s and 5m0s"}},
		{"listing lag too short", BackendConfig{Region: "eu-west-1", ListingLag: time.Second}, []string{"listing_lag: must be between 10s and 1h0m0s"}},
		{"listing lag too long", BackendConfig{Region: "eu-west-1", ListingLag: 2 * time.Hour}, []string{"listing_lag: must be between 10s and 1h0m0s"}},
		{"console url", BackendConfig{Region: "eu-west-1", ConsoleURL: "https://x/{job}"}, []string{"console_url: unknown placeholder {job}"}},
		{"console url scheme", BackendConfig{Region: "eu-west-1", ConsoleURL: "ftp://x/{job_id}"}, []string{"console_url: must start with https://"}},
		{"profile", BackendConfig{Region: "eu-west-1", Profile: " ops"}, []string{"profile: contains control characters or surrounding spaces"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, tc.cfg.Validate, tc.want)
		})
	}
}

// checkErrors runs validate and matches its field errors against want, in
// order, by substring.
func checkErrors(t *testing.T, validate func() error, want []string) {
	t.Helper()
	got := fieldErrors(t, validate())
	if len(got) != len(want) {
		t.Fatalf("got %d errors %q, want %d matching %q", len(got), got, len(want), want)
	}
	for i := range got {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("error %d = %q, want it to contain %q", i, got[i], want[i])
		}
	}
}

func TestBackendSetDefaults(t *testing.T) {
	c := BackendConfig{Region: "eu-west-1", SubmitRate: 7}
	c.SetDefaults()
	want := BackendConfig{Region: "eu-west-1", DescribeRate: 5, SubmitRate: 7, DescribeInterval: 2 * time.Second, Timeout: 10 * time.Second, ListingLag: time.Minute}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("SetDefaults (-want +got):\n%s", diff)
	}
}

func TestEventsValidate(t *testing.T) {
	valid := func() *EventsConfig {
		return &EventsConfig{APIKeyHeader: "X-Jobbridge-Key", APIKey: "${BATCH_EVENTS_KEY}"}
	}
	with := func(f func(*EventsConfig)) *EventsConfig {
		c := valid()
		f(c)
		return c
	}
	tests := []struct {
		name string
		cfg  *EventsConfig
		want []string
	}{
		{"minimal", valid(), nil},
		{"everything", with(func(c *EventsConfig) {
			c.APIKey, c.MaxAge, c.PollInterval, c.Quiet = "${file:/run/secrets/batch-events-key}", time.Hour, 5*time.Minute, time.Hour
		}), nil},
		{"a lower-case header name", with(func(c *EventsConfig) { c.APIKeyHeader = "x-jobbridge-key" }), nil},
		{"Authorization", with(func(c *EventsConfig) { c.APIKeyHeader = "Authorization" }), nil},
		{"empty", &EventsConfig{}, []string{
			"events.api_key: required: a ${NAME} or ${file:/path} reference",
			"events.api_key_header: required"}},
		{"a header name with a space", with(func(c *EventsConfig) { c.APIKeyHeader = "X Key" }), []string{`events.api_key_header: "X Key" is not an HTTP header name`}},
		{"a header EventBridge sets", with(func(c *EventsConfig) { c.APIKeyHeader = "user-agent" }), []string{"events.api_key_header: User-Agent is a header EventBridge sets itself"}},
		{"the key itself", with(func(c *EventsConfig) { c.APIKey = "s3cr3t-s3cr3t-s3cr3t" }), []string{"events.api_key: must be a single ${NAME}"}},
		{"a key with a reference inside", with(func(c *EventsConfig) { c.APIKey = "s3cr3t-${BATCH_EVENTS_KEY}" }), []string{"events.api_key: must be a single ${NAME}"}},
		{"a relative key file", with(func(c *EventsConfig) { c.APIKey = "${file:key.txt}" }), []string{"events.api_key: must be a single ${NAME}"}},
		{"durations out of range", with(func(c *EventsConfig) {
			c.MaxAge, c.PollInterval, c.Quiet = time.Minute, time.Second, 30*24*time.Hour
		}), []string{
			"events.max_age: must be between 5m0s and 72h0m0s",
			"events.poll_interval: must be between 30s and 24h0m0s",
			"events.quiet: must be between 1m0s and 168h0m0s"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := BackendConfig{Region: "eu-west-1", Events: tc.cfg}
			checkErrors(t, b.Validate, tc.want)
			for _, e := range fieldErrors(t, tc.cfg.Validate()) {
				if strings.HasPrefix(e, "events.") {
					t.Errorf("EventsConfig.Validate error %q: want a path relative to the block", e)
				}
				if strings.Contains(e, "s3cr3t") {
					t.Errorf("error %q quotes the key", e)
				}
			}
		})
	}
}

func TestEventsSetDefaults(t *testing.T) {
	c := BackendConfig{Region: "eu-west-1", Events: &EventsConfig{APIKeyHeader: "X-K", APIKey: "${K}", Quiet: time.Hour}}
	c.SetDefaults()
	want := EventsConfig{APIKeyHeader: "X-K", APIKey: "${K}", MaxAge: 24 * time.Hour, PollInterval: 10 * time.Minute, Quiet: time.Hour}
	if diff := cmp.Diff(want, *c.Events); diff != "" {
		t.Errorf("SetDefaults (-want +got):\n%s", diff)
	}
}

func TestJobValidate(t *testing.T) {
	base := func() JobConfig { return JobConfig{JobQueue: "default", JobDefinition: "etl"} }
	with := func(f func(*JobConfig)) JobConfig {
		c := base()
		f(&c)
		return c
	}
	tests := []struct {
		name string
		cfg  JobConfig
		want []string
	}{
		{"minimal", base(), nil},
		{"ARNs", with(func(c *JobConfig) {
			c.JobQueue = "arn:aws:batch:eu-west-1:123456789012:job-queue/etl"
			c.JobDefinition = "arn:aws:batch:eu-west-1:123456789012:job-definition/etl:12"
		}), nil},
		{"definition revision", with(func(c *JobConfig) { c.JobDefinition = "etl:3" }), nil},
		{"required", JobConfig{}, []string{"job_definition: required", "job_queue: required"}},
		{"templated queue", with(func(c *JobConfig) { c.JobQueue = "{args.queue}" }), []string{"job_queue: takes no placeholders"}},
		{"bad definition", with(func(c *JobConfig) { c.JobDefinition = "etl:latest" }), []string{"job_definition: \"etl:latest\" is not a job definition"}},
		{"unknown placeholder", with(func(c *JobConfig) { c.JobName = "run-{job.id}" }), []string{"job_name: unknown placeholder {job.id}"}},
		{"nested argument", with(func(c *JobConfig) { c.Parameters = map[string]string{"p": "{args.a.b}"} }), []string{"parameters.p: placeholder {args.a.b} has an invalid argument name"}},
		{"container", with(func(c *JobConfig) {
			c.ContainerOverrides = &ContainerOverrides{
				Command:     []string{"run", "{nope}"},
				Environment: map[string]string{"AWS_BATCH_X": "1", "1BAD": "2", "OK": "{args.ok}"},
				VCPUs:       "0", Memory: "2.5", GPUs: "-1",
			}
		}), []string{
			"container_overrides.command[1]: unknown placeholder {nope}",
			"container_overrides.environment.1BAD: \"1BAD\" is not an environment variable name",
			"container_overrides.environment.AWS_BATCH_X: names starting with AWS_BATCH are reserved",
			"container_overrides.gpus: -1 is negative",
			"container_overrides.memory: \"2.5\" is not an integer",
			"container_overrides.vcpus: \"0\" is not a positive number",
		}},
		{"templated numbers", with(func(c *JobConfig) {
			c.ContainerOverrides = &ContainerOverrides{VCPUs: "{args.cpus}", Memory: "{args.mem}", GPUs: "{args.gpus}"}
			c.ArraySize = "{args.shards}"
		}), nil},
		{"array size", with(func(c *JobConfig) { c.ArraySize = "10001" }), []string{"array_size: 10001 is not an array size between 2 and 10000"}},
		{"dependencies", with(func(c *JobConfig) {
			c.DependsOn = []Dependency{{JobID: "{args.after}", Type: "N_TO_N"}, {Type: "ALL"}}
		}), []string{"depends_on[1].job_id: required", "depends_on[1].type: \"ALL\" is not N_TO_N or SEQUENTIAL"}},
		{"too many dependencies", with(func(c *JobConfig) { c.DependsOn = make([]Dependency, 21) }), append([]string{"depends_on: at most 20"}, repeat("job_id: required", 21)...)},
		{"retry and timeout", with(func(c *JobConfig) { c.RetryAttempts, c.TimeoutSeconds = 11, 59 }), []string{
			"retry_attempts: must be between 1 and 10", "timeout_seconds: must be at least 60"}},
		{"tags", with(func(c *JobConfig) {
			c.Tags = map[string]string{"aws:x": "1", "jobbridge:tool": "2", "team": strings.Repeat("v", 257)}
		}), []string{"tags.aws:x: tag keys starting with aws: are reserved", "tags.jobbridge:tool: tag keys starting with jobbridge: are reserved", "tags.team: tag values must be at most 256"}},
		{"priority", with(func(c *JobConfig) { c.SchedulingPriority = new(10000) }), []string{"scheduling_priority: must be between 0 and 9999"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := slices.Clone(tc.want)
			slices.Sort(want)
			checkErrors(t, tc.cfg.Validate, want)
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestArgNames(t *testing.T) {
	c := JobConfig{
		JobName:    "report-{args.report}-{correlation_id}",
		Parameters: map[string]string{"date": "{args.date}"},
		ContainerOverrides: &ContainerOverrides{
			Command:     []string{"run", "{args.mode}"},
			Environment: map[string]string{"LEVEL": "{args.level}"},
			VCPUs:       "{args.cpus}",
			Memory:      "{args.mem}",
			GPUs:        "{args.gpus}",
		},
		ArraySize:       "{args.shards}",
		DependsOn:       []Dependency{{JobID: "{args.after}"}},
		Tags:            map[string]string{"owner": "{args.owner}"},
		ShareIdentifier: "{args.share}",
	}
	c.Parameters["tier"] = `{= args.env == "prod" ? args["region"] : "none"}`
	// Reads every argument: only the names it spells out are listed.
	c.Tags["debug"] = `{= args.exists(k, k == "debug") || has(args.verbose)}`
	want := []string{"after", "cpus", "date", "env", "gpus", "level", "mem", "mode", "owner", "region", "report", "shards", "share", "verbose"}
	if diff := cmp.Diff(want, c.ArgNames()); diff != "" {
		t.Errorf("ArgNames (-want +got):\n%s", diff)
	}
}

// TestExampleCatalog checks configs/aws-batch.yaml: every aws_batch backend
// and job block decodes with the yaml tags (unknown keys are errors), is
// valid, and uses only arguments its tool's input schema declares.
func TestExampleCatalog(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "configs", "aws-batch.yaml"))
	if err != nil {
		t.Fatalf("reading the example catalog: %v", err)
	}
	var doc struct {
		Backends map[string]yaml.Node `yaml:"backends"`
		Tools    []struct {
			Name        string    `yaml:"name"`
			Backend     string    `yaml:"backend"`
			Job         yaml.Node `yaml:"job"`
			InputSchema struct {
				Properties map[string]any `yaml:"properties"`
			} `yaml:"input_schema"`
		} `yaml:"tools"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("parsing the example catalog: %v", err)
	}
	batchBackends := map[string]bool{}
	for name, n := range doc.Backends {
		var typ struct {
			Type string `yaml:"type"`
		}
		if err := n.Decode(&typ); err != nil || typ.Type != "aws_batch" {
			continue
		}
		var cfg struct {
			Type          string `yaml:"type"`
			BackendConfig `yaml:",inline"`
		}
		decodeStrict(t, "backends."+name, &n, &cfg)
		if err := cfg.Validate(); err != nil {
			t.Errorf("backend %s: %v", name, err)
		}
		batchBackends[name] = true
	}
	if len(batchBackends) == 0 {
		t.Fatalf("the example catalog has no aws_batch backend")
	}
	var tools int
	for _, tool := range doc.Tools {
		if !batchBackends[tool.Backend] {
			continue
		}
		tools++
		var job JobConfig
		decodeStrict(t, "tool "+tool.Name, &tool.Job, &job)
		job.SetDefaults()
		if err := job.Validate(); err != nil {
			t.Errorf("tool %s: %v", tool.Name, err)
		}
		for _, arg := range job.ArgNames() {
			if _, ok := tool.InputSchema.Properties[arg]; !ok {
				t.Errorf("tool %s uses {args.%s}, which its input schema does not declare", tool.Name, arg)
			}
		}
	}
	if tools < 2 {
		t.Errorf("the example catalog has %d aws_batch tools, want at least 2", tools)
	}
}

// decodeStrict decodes n into v, failing on keys v does not have.
func decodeStrict(t *testing.T, what string, n *yaml.Node, v any) {
	t.Helper()
	out, err := yaml.Marshal(n)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(out)))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// TestTemplateErrorPositions checks that a template's mistake is reported at
// its field, at the byte of the value where it is.
func TestTemplateErrorPositions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*JobConfig)
		path   string
		offset int
		msg    string
	}{
		{"expression syntax in a parameter", func(c *JobConfig) { c.Parameters = map[string]string{"p": `x {= args.env == }`} }, "parameters.p", 18, "Syntax error"},
		{"unknown variable in the job name", func(c *JobConfig) { c.JobName = "run-{= job.id}" }, "job_name", 8, "unknown name job"},
		{"expression in a number", func(c *JobConfig) {
			c.ContainerOverrides = &ContainerOverrides{VCPUs: `{= args.big ? 2 : 0.5}`}
		}, "container_overrides.vcpus", 13, "no matching overload"},
		{"misspelt placeholder in a command", func(c *JobConfig) {
			c.ContainerOverrides = &ContainerOverrides{Command: []string{"run", "--id={corelation_id}"}}
		}, "container_overrides.command[1]", 6, "did you mean {correlation_id}?"},
		{"misspelt argument in a tag", func(c *JobConfig) { c.Tags = map[string]string{"team": "{arg.team}"} }, "tags.team", 1, "did you mean {args.team}?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := JobConfig{JobQueue: "default", JobDefinition: "etl"}
			tc.edit(&c)
			var fe *adapters.FieldError
			if err := c.Validate(); !errors.As(err, &fe) {
				t.Fatalf("Validate = %v, want a FieldError", err)
			}
			if fe.Path != tc.path || fe.Offset != tc.offset || !strings.Contains(fe.Err.Error(), tc.msg) {
				t.Errorf("got %s at offset %d, want %s at offset %d containing %q", fe, fe.Offset, tc.path, tc.offset, tc.msg)
			}
		})
	}
}
