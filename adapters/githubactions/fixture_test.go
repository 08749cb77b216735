package githubactions

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/fakes/githubfake"
)

// testToken is the secret the tests hand the adapter.
const testToken = "ghp_T0pSecretT0kenValue42"

// testWebhookSecret is the webhook secret of the tests' events: blocks
// (environment variable TEST_WEBHOOK_SECRET).
const testWebhookSecret = "whsec-Sh4redW1thGitHub"

// t0 is when every fake clock starts.
var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// clock is a manually advanced clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// testConfig is testdata/fake.yaml.
type testConfig struct {
	Backend BackendConfig        `yaml:"backend"`
	Tools   map[string]JobConfig `yaml:"tools"`
}

func loadConfig(t testing.TB) testConfig {
	t.Helper()
	b, err := os.ReadFile("testdata/fake.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c testConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("decoding testdata/fake.yaml: %v", err)
	}
	return c
}

// testWorkflows are the fake's workflows for the tools of testdata/fake.yaml;
// durations are short enough for tests on the real clock.
func testWorkflows() []githubfake.Workflow {
	title := "{inputs.correlation_id}"
	return []githubfake.Workflow{
		{File: "succeeds.yml", Name: "Build", Script: githubfake.Script{
			RunName: "Build [" + title + "]", Queued: 20 * time.Millisecond,
			Jobs:      []githubfake.JobScript{{Name: "build", Duration: 20 * time.Millisecond}, {Name: "test", Duration: 20 * time.Millisecond}},
			Artifacts: []githubfake.ArtifactScript{{Name: "app-linux-amd64", Size: 5 << 20}, {Name: "coverage", Size: 2048}},
		}},
		{File: "fails.yml", Name: "Tests", Script: githubfake.Script{
			RunName: "Tests [" + title + "]", Queued: 10 * time.Millisecond,
			Jobs: []githubfake.JobScript{
				{Name: "lint", Duration: 10 * time.Millisecond},
				{Name: "unit", Duration: 20 * time.Millisecond, Conclusion: "failure", LogLines: 300},
			},
			Conclusion: "failure",
		}},
		{File: "long.yml", Name: "Soak", Script: githubfake.Script{
			RunName: "Soak [" + title + "]",
			Jobs:    []githubfake.JobScript{{Name: "soak", Duration: 100 * time.Hour}},
		}},
		{File: "approval.yml", Name: "Deploy", Script: githubfake.Script{
			RunName: "Deploy [" + title + "]",
			Jobs:    []githubfake.JobScript{{Name: "build", Duration: 10 * time.Millisecond}, {Name: "deploy", Duration: 20 * time.Millisecond}},
			Approval: &githubfake.Approval{Job: 1, Environment: "production", EnvironmentID: 77,
				Reviewers: []string{"octocat", "team:release"}, CanApprove: true},
		}},
		{ID: 1001, File: "numbered.yml", Name: "Numbered", Script: githubfake.Script{}},
		{File: "scripted.yml", Name: "Scripted", Script: githubfake.Script{}},
	}
}

// fixture is a GitHub fake on loopback and the adapter talking to it.
type fixture struct {
	t     *testing.T
	clock *clock // nil: real time
	gh    *githubfake.Server
	base  string
	cfg   testConfig
	logs  *syncWriter
	// checkingLogs is set once the log check is registered.
	checkingLogs bool
}

// logText returns what the adapters logged so far.
func (f *fixture) logText() string {
	f.logs.mu.Lock()
	defer f.logs.mu.Unlock()
	return f.logs.w.String()
}

type fixtureOptions struct {
	realTime  bool
	workflows []githubfake.Workflow
	scripts   map[string]githubfake.Script
	fake      func(*githubfake.Options)
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	f := &fixture{t: t, cfg: loadConfig(t), logs: &syncWriter{w: &bytes.Buffer{}}}
	fo := &githubfake.Options{Workflows: o.workflows, Scripts: o.scripts, Tokens: []string{testToken}}
	if fo.Workflows == nil {
		fo.Workflows = testWorkflows()
	}
	if !o.realTime {
		f.clock = &clock{now: t0}
		fo.Now = f.clock.Now
	}
	if o.fake != nil {
		o.fake(fo)
	}
	f.gh = githubfake.New(fo)
	base, err := f.gh.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("starting the GitHub fake: %v", err)
	}
	t.Cleanup(func() { f.gh.Close() })
	f.base = base
	f.cfg.Backend.APIURL = base
	return f
}

// adapter returns a new adapter on the fixture's backend, changed by edit.
func (f *fixture) adapter(edit func(*BackendConfig, map[string]JobConfig)) *Adapter {
	f.t.Helper()
	a, err := f.newAdapter(edit)
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	return a
}

func (f *fixture) newAdapter(edit func(*BackendConfig, map[string]JobConfig)) (*Adapter, error) {
	backend := f.cfg.Backend
	tools := map[string]JobConfig{}
	for k, v := range f.cfg.Tools {
		tools[k] = v
	}
	if edit != nil {
		edit(&backend, tools)
	}
	if !f.checkingLogs {
		// The logger comes scoped with the backend's name, as jobbridge
		// serve hands it over; no line may name the backend again.
		f.checkingLogs = true
		f.t.Cleanup(func() {
			for _, line := range strings.Split(f.logText(), "\n") {
				if strings.Count(line, "backend=") > 1 {
					f.t.Errorf("log line repeats the backend key: %s", line)
				}
			}
		})
	}
	opts := &Options{
		Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("backend", "github"),
		Getenv: func(name string) (string, bool) {
			v, ok := map[string]string{"TEST_GITHUB_TOKEN": testToken, "TEST_WEBHOOK_SECRET": testWebhookSecret}[name]
			return v, ok
		},
		SearchWait:     2 * time.Second,
		SearchInterval: 20 * time.Millisecond,
	}
	if f.clock != nil {
		opts.Now = f.clock.Now
	}
	return New("github", backend, tools, opts)
}

// start starts a job of the tool and fails the test on an error.
func (f *fixture) start(a *Adapter, tool string, args map[string]any, corr string) adapters.JobRef {
	f.t.Helper()
	ref, err := a.Start(f.t.Context(), adapters.StartRequest{Tool: tool, Arguments: args, CorrelationID: corr})
	if err != nil {
		f.t.Fatalf("Start(%s): %v", tool, err)
	}
	return ref
}

// poll polls one ref and fails the test on an observation error.
func (f *fixture) poll(a *Adapter, ref adapters.JobRef) adapters.Observation {
	f.t.Helper()
	o := f.pollErr(a, ref)
	if o.Err != nil {
		f.t.Fatalf("Poll(%s): %v", ref.ID, o.Err)
	}
	return o
}

func (f *fixture) pollErr(a *Adapter, ref adapters.JobRef) adapters.Observation {
	f.t.Helper()
	obs, err := a.Poll(f.t.Context(), []adapters.JobRef{ref})
	if err != nil {
		f.t.Fatalf("Poll: %v", err)
	}
	return obs[0]
}

func runID(t *testing.T, ref adapters.JobRef) int64 {
	t.Helper()
	var d refData
	if err := json.Unmarshal(ref.Data, &d); err != nil || d.RunID == 0 {
		t.Fatalf("ref %s has no run ID: %s", ref.ID, ref.Data)
	}
	return d.RunID
}

// syncWriter serialises writes to a buffer shared by goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
