package rest

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/jobbridge/jobbridge/adapters"
)

// loadJob decodes testdata/jobapi.yaml.
func loadJob(t *testing.T) JobConfig {
	t.Helper()
	b, err := os.ReadFile("testdata/jobapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c JobConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("decoding testdata/jobapi.yaml: %v", err)
	}
	return c
}

// fieldPaths lists the paths of the FieldErrors joined in err.
func fieldPaths(t *testing.T, err error) []string {
	t.Helper()
	var paths []string
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
			t.Errorf("error %q is not a *adapters.FieldError", err)
			return
		}
		paths = append(paths, fe.Path)
	}
	if err != nil {
		walk(err)
	}
	return paths
}

func TestBackendValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*BackendConfig)
		want   []string
	}{
		{"valid", func(*BackendConfig) {}, nil},
		{"https with port and prefix", func(c *BackendConfig) { c.BaseURL = "https://127.0.0.1:8443/api/" }, nil},
		{"missing base_url", func(c *BackendConfig) { c.BaseURL = "" }, []string{"base_url"}},
		{"relative base_url", func(c *BackendConfig) { c.BaseURL = "/api" }, []string{"base_url"}},
		{"ftp base_url", func(c *BackendConfig) { c.BaseURL = "ftp://127.0.0.1/" }, []string{"base_url"}},
		{"base_url without host", func(c *BackendConfig) { c.BaseURL = "http:///api" }, []string{"base_url"}},
		{"base_url with credentials", func(c *BackendConfig) { c.BaseURL = "http://u:p@127.0.0.1/" }, []string{"base_url"}},
		{"base_url with query", func(c *BackendConfig) { c.BaseURL = "http://127.0.0.1/?a=1" }, []string{"base_url"}},
		{"header with line break", func(c *BackendConfig) { c.Headers["X-Two"] = "a\r\nb" }, []string{"headers.X-Two"}},
		{"bad header name", func(c *BackendConfig) { c.Headers["Bad Name"] = "x" }, []string{"headers.Bad Name"}},
		{"unterminated env reference", func(c *BackendConfig) { c.Headers["X-Env"] = "${TOKEN" }, []string{"headers.X-Env"}},
		{"bad env reference", func(c *BackendConfig) { c.Headers["X-Env"] = "${1X}" }, []string{"headers.X-Env"}},
		{"placeholder in backend header", func(c *BackendConfig) { c.Headers["X-Job"] = "{job.id}" }, []string{"headers.X-Job"}},
		{"negative timeout", func(c *BackendConfig) { c.Timeout = -time.Second }, []string{"timeout"}},
		{"too many retries", func(c *BackendConfig) { n := 11; c.MaxRetries = &n }, []string{"max_retries"}},
		{"negative retries", func(c *BackendConfig) { n := -1; c.MaxRetries = &n }, []string{"max_retries"}},
		{"negative listing lag", func(c *BackendConfig) { d := -time.Second; c.ListingLag = &d }, []string{"listing_lag"}},
		{"bad idempotency header", func(c *BackendConfig) { c.IdempotencyHeader = "Idem Key" }, []string{"idempotency_header"}},
		{"short IPv4 host", func(c *BackendConfig) { c.BaseURL = "http://127.1:8080/" }, []string{"base_url"}},
		{"decimal IPv4 host", func(c *BackendConfig) { c.BaseURL = "http://2130706433/" }, []string{"base_url"}},
		{"hex IPv4 host", func(c *BackendConfig) { c.BaseURL = "http://0x7f000001/" }, []string{"base_url"}},
		{"octal IPv4 host", func(c *BackendConfig) { c.BaseURL = "http://0177.0.0.1/" }, []string{"base_url"}},
		{"host with digits", func(c *BackendConfig) { c.BaseURL = "https://api2.jobs.test/v1" }, nil},
		{"allowed networks", func(c *BackendConfig) { c.AllowNetworks = []string{"10.0.0.0/8", "fd00::/8", "0.0.0.0/0"} }, nil},
		{
			"bad allowed networks",
			func(c *BackendConfig) {
				c.AllowNetworks = []string{"10.0.0.1", "10.1.2.3/8", "::ffff:127.0.0.0/104", "intranet", "10.0.0.0/33"}
			},
			[]string{"allow_networks[0]", "allow_networks[1]", "allow_networks[2]", "allow_networks[3]", "allow_networks[4]"},
		},
		{
			"everything at once",
			func(c *BackendConfig) { c.BaseURL = ""; c.Timeout = -1; c.IdempotencyHeader = "a:b" },
			[]string{"base_url", "timeout", "idempotency_header"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testBackend()
			tt.mutate(&c)
			if diff := cmp.Diff(tt.want, fieldPaths(t, c.Validate())); diff != "" {
				t.Errorf("error paths mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJobValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*JobConfig)
		want   []string
	}{
		{"valid", func(*JobConfig) {}, nil},
		{"lower-case method", func(c *JobConfig) { c.Start.Method = "put" }, nil},
		{"bad method", func(c *JobConfig) { c.Start.Method = "FETCH" }, []string{"start.method"}},
		{"status not GET", func(c *JobConfig) { c.Status.Method = "POST" }, []string{"status.method"}},
		{"find not GET", func(c *JobConfig) { c.Find.Method = "DELETE" }, []string{"find.method"}},
		{"missing path", func(c *JobConfig) { c.Start.Path = "" }, []string{"start.path"}},
		{"relative path", func(c *JobConfig) { c.Start.Path = "jobs" }, []string{"start.path"}},
		{"query in path", func(c *JobConfig) { c.Start.Path = "/jobs?x=1" }, []string{"start.path"}},
		{"job ID before start", func(c *JobConfig) { c.Start.Path = "/jobs/{job.id}" }, []string{"start.path"}},
		{"unknown placeholder", func(c *JobConfig) { c.Status.Path = "/jobs/{job.name}" }, []string{"status.path"}},
		{"bare args placeholder", func(c *JobConfig) { c.Status.Path = "/jobs/{args}" }, []string{"status.path"}},
		{"empty argument name", func(c *JobConfig) { c.Status.Path = "/jobs/{args.}" }, []string{"status.path"}},
		{"location mid-path", func(c *JobConfig) { c.Status.Path = "/x{job.location}" }, []string{"status.path"}},
		{"location glued to text", func(c *JobConfig) { c.Cancel.Path = "{job.location}cancel" }, []string{"cancel.path"}},
		{"location continued", func(c *JobConfig) { c.Find = nil; c.Cancel.Path = "{job.location}/cancel" }, nil},
		{"location without from_location", func(c *JobConfig) {
			c.JobID = JobIDConfig{Field: "id"}
			c.Status.Path = "{job.location}"
		}, []string{"status.path"}},
		{"location after find", func(c *JobConfig) { c.Status.Path = "{job.location}" }, []string{"status.path"}},
		{"answers outside respond", func(c *JobConfig) { c.Start.Body = map[string]any{"a": []any{"{answers}"}} }, []string{"start.body.a.0"}},
		{"answers in respond query", func(c *JobConfig) { c.Respond.Query = map[string]string{"a": "{answers}"} }, []string{"respond.query.a"}},
		{"base_url outside links", func(c *JobConfig) { c.Start.Query = map[string]string{"u": "{base_url}"} }, []string{"start.query.u"}},
		{"body on GET", func(c *JobConfig) { c.Status.Body = map[string]any{"x": 1} }, []string{"status.body"}},
		{"non-string body key", func(c *JobConfig) { c.Start.Body = map[any]any{1: "x"} }, []string{"start.body"}},
		{"header with line break", func(c *JobConfig) { c.Cancel.Headers = map[string]string{"X-A": "a\nb"} }, []string{"cancel.headers.X-A"}},
		{"header placeholder", func(c *JobConfig) { c.Cancel.Headers = map[string]string{"X-Job": "{job.id}", "X-Env": "${HOME}"} }, nil},
		{"no job ID source", func(c *JobConfig) { c.JobID = JobIDConfig{} }, []string{"job_id"}},
		{"two job ID sources", func(c *JobConfig) { c.JobID.Field = "id" }, []string{"job_id"}},
		{"missing status field", func(c *JobConfig) { c.Status.Field = "" }, []string{"status.field"}},
		{"missing states", func(c *JobConfig) { c.Status.States = nil }, []string{"status.states"}},
		{"bad state", func(c *JobConfig) { c.Status.States["RUNNING"] = "runnin" }, []string{"status.states.RUNNING"}},
		{"no final state", func(c *JobConfig) { c.Status.States = map[string]string{"a": "working"} }, []string{"status.states"}},
		{"progress without done", func(c *JobConfig) { c.Status.Progress.Done = "" }, []string{"status.progress.done"}},
		{"empty result", func(c *JobConfig) { c.Status.Result = &ResultConfig{} }, []string{"status.result"}},
		{"link not a URL", func(c *JobConfig) { c.Status.Links["Job"] = "/jobs/{job.id}" }, []string{"status.links.Job"}},
		{"link with answers", func(c *JobConfig) { c.Status.Links["Job"] = "{base_url}/{answers}" }, []string{"status.links.Job"}},
		{"find without field", func(c *JobConfig) { c.Find.Field = "" }, []string{"find.field"}},
		{"find with job ID", func(c *JobConfig) { c.Find.Path = "/jobs/{job.id}" }, []string{"find.path"}},
		// A lookup runs with the arguments of the submission it settles.
		{"find with an argument", func(c *JobConfig) { c.Find.Query["team"] = "{args.team}" }, nil},
		{"find path with an argument", func(c *JobConfig) { c.Find.Path = "/teams/{args.team}/jobs" }, nil},
		{"find with a POST search", func(c *JobConfig) { c.Find.Method = "POST"; c.Find.Body = map[string]any{"label": "{correlation_id}"} }, nil},
		{"find with a PUT", func(c *JobConfig) { c.Find.Method = "PUT" }, []string{"find.method"}},
		{"placeholder in job_id field", func(c *JobConfig) { c.JobID = JobIDConfig{Field: "{args.kind}.id"}; c.Find = nil }, []string{"job_id.field"}},
		{"placeholder in status field", func(c *JobConfig) { c.Status.Field = "jobs.{job.id}.status" }, []string{"status.field"}},
		{"placeholder in find field", func(c *JobConfig) { c.Find.Field = "jobs.{correlation_id}.id" }, []string{"find.field"}},
		{"placeholder in result path", func(c *JobConfig) { c.Status.Result.Text = "{args.out}" }, []string{"status.result.text"}},
		{"placeholder in message path", func(c *JobConfig) { c.Status.Message = "msg.{job.id}" }, []string{"status.message"}},
		{"JSON path multipath braces", func(c *JobConfig) { c.Status.Result.Structured = "{id,status}" }, nil},
		{"unknown state", func(c *JobConfig) { c.Status.States["DONE"] = "completed" }, []string{"status.states.DONE"}},
		{"literal braces", func(c *JobConfig) {
			c.Start.Body = map[string]any{"script": "echo ${HOME} { not a placeholder }"}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := loadJob(t)
			tt.mutate(&c)
			if diff := cmp.Diff(tt.want, fieldPaths(t, c.Validate())); diff != "" {
				t.Errorf("error paths mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAllowNetworksMessages(t *testing.T) {
	c := testBackend()
	c.AllowNetworks = []string{"10.0.0.1", "10.1.2.3/8", "::ffff:127.0.0.0/104"}
	var got []string
	for _, e := range c.Validate().(interface{ Unwrap() []error }).Unwrap() {
		got = append(got, e.Error())
	}
	want := []string{
		`allow_networks[0]: "10.0.0.1" is an address, not a network; write 10.0.0.1/32`,
		`allow_networks[1]: "10.1.2.3/8" has host bits set; write 10.0.0.0/8`,
		`allow_networks[2]: "::ffff:127.0.0.0/104": write IPv4-mapped networks as IPv4`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages mismatch (-want +got):\n%s", diff)
	}
}

func TestSetDefaults(t *testing.T) {
	var b BackendConfig
	b.SetDefaults()
	three, minute := 3, time.Minute
	if diff := cmp.Diff(BackendConfig{Timeout: 10 * time.Second, MaxRetries: &three, ListingLag: &minute}, b); diff != "" {
		t.Errorf("backend defaults mismatch (-want +got):\n%s", diff)
	}
	zero := 0
	b = BackendConfig{Timeout: time.Second, MaxRetries: &zero}
	b.SetDefaults()
	if b.Timeout != time.Second || *b.MaxRetries != 0 {
		t.Errorf("SetDefaults overwrote set values: %+v", b)
	}

	j := JobConfig{Cancel: &Call{}, Respond: &Call{Method: "put"}, Find: &FindConfig{}}
	j.SetDefaults()
	got := []string{j.Start.Method, j.Status.Method, j.Cancel.Method, j.Respond.Method, j.Find.Method}
	if diff := cmp.Diff([]string{"POST", "GET", "POST", "PUT", "GET"}, got); diff != "" {
		t.Errorf("methods mismatch (-want +got):\n%s", diff)
	}
}

func TestArgNames(t *testing.T) {
	c := loadJob(t)
	c.Status.Links["Dashboard"] = "https://127.0.0.1/d/{args.team}"
	c.Cancel.Headers = map[string]string{"X-Reason": "{args.reason}"}
	want := []string{"data", "duration", "error_message", "outcome", "output", "questions", "reason", "team"}
	if diff := cmp.Diff(want, c.ArgNames()); diff != "" {
		t.Errorf("ArgNames mismatch (-want +got):\n%s", diff)
	}
}

func TestNewReportsToolErrors(t *testing.T) {
	bad := loadJob(t)
	bad.Status.Field = ""
	_, err := New("jobs", testBackend(), map[string]JobConfig{"ok": loadJob(t), "broken": bad}, &Options{Getenv: testEnv})
	var fe *adapters.FieldError
	if !errors.As(err, &fe) || fe.Path != "status.field" {
		t.Fatalf("New = %v, want a FieldError at status.field", err)
	}
	if want := `tool "broken": status.field: required`; err.Error() != want {
		t.Errorf("New error = %q, want %q", err, want)
	}
}

// TestPlaceholderMessages checks what a catalog author is told about a
// placeholder that cannot be filled where it is written.
func TestPlaceholderMessages(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*JobConfig)
		want   string
	}{
		{"misspelled args", func(c *JobConfig) { c.Start.Query = map[string]string{"a": "{arg.team}"} },
			"start.query.a: unknown placeholder {arg.team} (did you mean {args.team}?)"},
		{"misspelled correlation ID", func(c *JobConfig) { c.Start.Query = map[string]string{"a": "{correlationid}"} },
			"start.query.a: unknown placeholder {correlationid} (did you mean {correlation_id}?)"},
		{"job_id for job.id", func(c *JobConfig) { c.Status.Path = "/jobs/{job_id}" },
			"status.path: unknown placeholder {job_id} (did you mean {job.id}?)"},
		{"nothing close", func(c *JobConfig) { c.Status.Path = "/jobs/{whatever}" },
			"status.path: unknown placeholder {whatever} (known here: {args.NAME}, {correlation_id}, {job.id}, {job.location})"},
		{"job ID in start", func(c *JobConfig) { c.Start.Path = "/jobs/{job.id}" },
			"start.path: placeholder {job.id} cannot be filled here: the job does not exist yet"},
		{"job ID in find", func(c *JobConfig) { c.Find.Query["job"] = "{job.id}" },
			"find.query.job: placeholder {job.id} cannot be filled here: the job does not exist yet"},
		{"answers outside respond", func(c *JobConfig) { c.Start.Body = map[string]any{"a": "{answers}"} },
			"start.body.a: placeholder {answers} cannot be filled here: {answers} is only known in the respond body"},
		{"placeholder in a JSON path", func(c *JobConfig) { c.Status.Field = "jobs.{job.id}.status" },
			"status.field: a JSON path takes no placeholders: {job.id} would not be filled in (the path is applied to the answer as written; write an expression starting with \"=\" to compute a value)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := loadJob(t)
			tt.mutate(&c)
			err := c.Validate()
			if err == nil || err.Error() != tt.want {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestCheckAddress checks that a base_url the adapter would refuse at every
// connect is reported before the server starts, with the network to allow.
func TestCheckAddress(t *testing.T) {
	tests := []struct {
		name, baseURL string
		allow         []string
		want          string // "" for no problem
	}{
		{"public address", "https://93.184.215.14/api", nil, ""},
		{"name, not resolved", "https://jobs.internal.example", nil, ""},
		{"loopback", "http://127.0.0.1:9000/", nil,
			"base_url: host 127.0.0.1 is in 127.0.0.0/8, a loopback range, which the adapter refuses by default; add 127.0.0.0/8 to allow_networks to permit it"},
		{"loopback allowed", "http://127.0.0.1:9000/", []string{"127.0.0.0/8"}, ""},
		{"loopback allowed narrowly", "http://127.0.0.1:9000/", []string{"127.0.0.1/32"}, ""},
		{"localhost", "http://localhost:9000/", nil,
			"base_url: host localhost is this machine's loopback interface (127.0.0.0/8, ::1), which the adapter refuses by default; add 127.0.0.0/8 to allow_networks to permit it"},
		{"localhost with final dot", "http://LOCALHOST.:9000/", nil,
			"base_url: host LOCALHOST. is this machine's loopback interface (127.0.0.0/8, ::1), which the adapter refuses by default; add 127.0.0.0/8 to allow_networks to permit it"},
		{"subdomain of localhost", "http://api.localhost/", nil,
			"base_url: host api.localhost is this machine's loopback interface (127.0.0.0/8, ::1), which the adapter refuses by default; add 127.0.0.0/8 to allow_networks to permit it"},
		{"localhost allowed over IPv6", "http://localhost/", []string{"::1/128"}, ""},
		{"private, other network allowed", "http://192.168.1.10/", []string{"10.0.0.0/8"},
			"base_url: host 192.168.1.10 is in 192.168.0.0/16, a private range, which the adapter refuses by default; add 192.168.0.0/16 to allow_networks to permit it"},
		{"cloud metadata", "http://169.254.169.254/latest", nil,
			"base_url: host 169.254.169.254 is in 169.254.0.0/16, a link-local range, which the adapter refuses by default; add 169.254.0.0/16 to allow_networks to permit it"},
		{"CGNAT", "http://100.64.0.1/", nil,
			"base_url: host 100.64.0.1 is in 100.64.0.0/10, a shared address space (CGNAT) range, which the adapter refuses by default; add 100.64.0.0/10 to allow_networks to permit it"},
		{"IPv6 ULA", "http://[fd00::1]/", nil,
			"base_url: host fd00::1 is in fc00::/7, a unique local (ULA) range, which the adapter refuses by default; add fc00::/7 to allow_networks to permit it"},
		{"IPv4-mapped", "http://[::ffff:10.0.0.1]/", nil,
			"base_url: host ::ffff:10.0.0.1 is in 10.0.0.0/8, a private range, which the adapter refuses by default; add 10.0.0.0/8 to allow_networks to permit it"},
		{"NAT64 embedding loopback", "http://[64:ff9b::7f00:1]/", nil,
			"base_url: host 64:ff9b::7f00:1 embeds 127.0.0.1, which is in 127.0.0.0/8, a loopback range, refused by default; add 127.0.0.0/8 to allow_networks to permit it"},
		{"invalid base_url left to Validate", "ftp://127.0.0.1/", nil, ""},
		{"invalid allow_networks left to Validate", "http://127.0.0.1/", []string{"intranet"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := BackendConfig{BaseURL: tt.baseURL, AllowNetworks: tt.allow}
			got := ""
			if err := c.CheckAddress(); err != nil {
				var fe *adapters.FieldError
				if !errors.As(err, &fe) || fe.Path != "base_url" {
					t.Errorf("CheckAddress() = %v, want a FieldError at base_url", err)
				}
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("CheckAddress() = %q\nwant %q", got, tt.want)
			}
		})
	}
}

// The events block as the package documentation writes it decodes, takes
// its defaults and validates.
func TestEventsBlockDecodes(t *testing.T) {
	const src = `
base_url: https://jobs.example.com/api/v1
events:
  secret: ${JOBS_CALLBACK_SECRET}
  signature:
    header: X-Signature
    scheme: hmac_sha256_hex
    prefix: "sha256="
  timestamp_header: X-Timestamp
  id_header: X-Delivery
  tolerance: 2m
  job_id: "= body.job.id"
  at: updated_at
  when: 'body.type.startsWith("job.")'
  tool: deploy
  poll_interval: 15m
  quiet: 1h
`
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	var c BackendConfig
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("decoding: %v", err)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := &EventsConfig{
		Secret:          "${JOBS_CALLBACK_SECRET}",
		Signature:       SignatureConfig{Header: "X-Signature", Scheme: "hmac_sha256_hex", Prefix: "sha256="},
		TimestampHeader: "X-Timestamp",
		IDHeader:        "X-Delivery",
		Tolerance:       2 * time.Minute,
		JobID:           "= body.job.id",
		At:              "updated_at",
		When:            `body.type.startsWith("job.")`,
		Tool:            "deploy",
		PollInterval:    15 * time.Minute,
		Quiet:           time.Hour,
	}
	if diff := cmp.Diff(want, c.Events); diff != "" {
		t.Errorf("events block mismatch (-want +got):\n%s", diff)
	}

	var d BackendConfig
	if err := yaml.Unmarshal([]byte("base_url: https://jobs.example.com\nevents: {secret: '${S}', job_id: id}\n"), &d); err != nil {
		t.Fatal(err)
	}
	d.SetDefaults()
	wantDefaults := &EventsConfig{
		Secret:          "${S}",
		Signature:       SignatureConfig{Header: "webhook-signature", Scheme: "standard_webhooks"},
		TimestampHeader: "webhook-timestamp",
		IDHeader:        "webhook-id",
		Tolerance:       5 * time.Minute,
		JobID:           "id",
		PollInterval:    10 * time.Minute,
		Quiet:           30 * time.Minute,
	}
	if diff := cmp.Diff(wantDefaults, d.Events); diff != "" {
		t.Errorf("defaults mismatch (-want +got):\n%s", diff)
	}
}
