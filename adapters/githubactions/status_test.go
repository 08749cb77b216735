package githubactions

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/fakes/githubfake"
)

// twoJobs runs build then test, a minute each, after a minute in the queue.
func twoJobs(conclusion string) githubfake.Script {
	return githubfake.Script{
		RunName: "Scripted [{inputs.correlation_id}]",
		Queued:  time.Minute,
		Jobs: []githubfake.JobScript{
			{Name: "build", Duration: time.Minute},
			{Name: "test", Duration: time.Minute, LogLines: 300},
		},
		Conclusion: conclusion,
		Artifacts:  []githubfake.ArtifactScript{{Name: "app", Size: 5 << 20}, {Name: "junit", Size: 1536}},
	}
}

// TestStatusMapping covers every run status and conclusion: the state, the
// status message and the result content a user relies on.
func TestStatusMapping(t *testing.T) {
	waiting := twoJobs("success")
	waiting.Approval = &githubfake.Approval{Job: 1, Environment: "production", EnvironmentID: 7,
		Reviewers: []string{"octocat", "team:release"}}
	pending := twoJobs("success")
	pending.Pending = time.Minute

	scripts := map[string]githubfake.Script{"waiting": waiting, "pending": pending}
	for _, c := range []string{"success", "neutral", "skipped", "failure", "timed_out", "startup_failure", "stale", "action_required", "cancelled"} {
		scripts[c] = twoJobs(c)
	}

	tests := []struct {
		name, script string
		after        time.Duration
		want         adapters.State
		message      string
		progress     *adapters.Progress
		text         []string // substrings of the result text
		notText      []string
	}{
		{name: "pending", script: "pending", want: adapters.StateWorking, message: "pending: waiting for its concurrency group"},
		{name: "queued", script: "success", want: adapters.StateWorking, message: "queued: waiting for a runner"},
		{name: "in progress, first job", script: "success", after: 90 * time.Second, want: adapters.StateWorking,
			message: "in_progress: job build (0 of 2 jobs done)", progress: &adapters.Progress{Done: 0, Total: 2}},
		{name: "in progress, second job", script: "success", after: 150 * time.Second, want: adapters.StateWorking,
			message: "in_progress: job test (1 of 2 jobs done)", progress: &adapters.Progress{Done: 1, Total: 2}},
		{name: "waiting, approvals off", script: "waiting", after: 150 * time.Second, want: adapters.StateWorking,
			message: "waiting: deployment to production awaits approval by octocat, team release"},
		{name: "success", script: "success", after: time.Hour, want: adapters.StateSucceeded, message: "completed: success",
			text:    []string{"concluded success", "Jobs:\n- build: success\n- test: success", "Artifacts:\n- app (5.0 MiB)\n- junit (1.5 KiB)", "/octo-org/app/actions/runs/"},
			notText: []string{"log of job"}},
		{name: "neutral", script: "neutral", after: time.Hour, want: adapters.StateSucceeded, message: "completed: neutral",
			text: []string{"finished without failures (neutral)"}},
		{name: "skipped", script: "skipped", after: time.Hour, want: adapters.StateSucceeded, message: "completed: skipped",
			text: []string{"finished without failures (skipped)"}},
		{name: "failure", script: "failure", after: time.Hour, want: adapters.StateToolError, message: "completed: failure",
			text:    []string{"- test: failure", "Last 200 lines of the log of job test:", "step output line 102\n", "##[error]Process completed with exit code 1."},
			notText: []string{"step output line 101\n", "log of job build"}},
		{name: "timed out", script: "timed_out", after: time.Hour, want: adapters.StateToolError, message: "completed: timed_out",
			text: []string{"- test: timed_out", "Last 200 lines of the log of job test:"}},
		{name: "startup failure", script: "startup_failure", after: time.Hour, want: adapters.StateToolError, message: "completed: startup_failure"},
		{name: "stale", script: "stale", after: time.Hour, want: adapters.StateToolError, message: "completed: stale"},
		{name: "action required", script: "action_required", after: time.Hour, want: adapters.StateToolError, message: "completed: action_required",
			text: []string{"needs a maintainer's action"}},
		{name: "cancelled", script: "cancelled", after: time.Hour, want: adapters.StateCancelled, message: "completed: cancelled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{scripts: scripts})
			a := f.adapter(nil)
			ref := f.start(a, "scripted", map[string]any{"script": tt.script}, "corr-"+tt.script)
			f.clock.Advance(tt.after)
			o := f.poll(a, ref)
			if o.State != tt.want || o.Message != tt.message {
				t.Errorf("observation = %v %q, want %v %q", o.State, o.Message, tt.want, tt.message)
			}
			if diff := cmp.Diff(tt.progress, o.Progress); diff != "" {
				t.Errorf("progress (-want +got):\n%s", diff)
			}
			if len(o.Links) != 1 || !strings.HasSuffix(o.Links[0].URL, "/octo-org/app/actions/runs/"+ref.ID) {
				t.Errorf("links = %+v, want the run's html_url", o.Links)
			}
			if !tt.want.Terminal() {
				if o.Result != nil {
					t.Errorf("a working observation has a result: %+v", o.Result)
				}
				return
			}
			if o.Result == nil {
				t.Fatalf("a %v observation has no result", o.State)
			}
			for _, s := range tt.text {
				if !strings.Contains(o.Result.Text, s) {
					t.Errorf("result text lacks %q:\n%s", s, o.Result.Text)
				}
			}
			for _, s := range tt.notText {
				if strings.Contains(o.Result.Text, s) {
					t.Errorf("result text has %q:\n%s", s, o.Result.Text)
				}
			}
			st := o.Result.Structured
			if st["conclusion"] != tt.script || st["run_id"] != runID(t, ref) {
				t.Errorf("structured result = %v, want conclusion %q and run_id %d", st, tt.script, runID(t, ref))
			}
		})
	}
}

// TestStructuredResult checks the machine-readable result of a finished run.
func TestStructuredResult(t *testing.T) {
	f := newFixture(t, fixtureOptions{scripts: map[string]githubfake.Script{"failure": twoJobs("failure")}})
	a := f.adapter(nil)
	ref := f.start(a, "scripted", map[string]any{"script": "failure"}, "corr-structured")
	f.clock.Advance(time.Hour)
	o := f.poll(a, ref)
	st := o.Result.Structured
	runURL := f.base + "octo-org/app/actions/runs/" + ref.ID
	if st["html_url"] != runURL {
		t.Errorf("html_url = %v, want %s", st["html_url"], runURL)
	}
	delete(st, "html_url")
	for _, j := range st["jobs"].([]any) {
		m := j.(map[string]any)
		if u, _ := m["html_url"].(string); !strings.HasPrefix(u, runURL+"/job/") {
			t.Errorf("job %v: html_url %q is not under the run", m["name"], u)
		}
		delete(m, "html_url")
	}
	want := map[string]any{
		"run_id": runID(t, ref), "run_number": 1, "run_attempt": 1, "workflow": "Scripted",
		"title": "Scripted [corr-structured]", "conclusion": "failure",
		"jobs": []any{
			map[string]any{"name": "build", "conclusion": "success"},
			map[string]any{"name": "test", "conclusion": "failure"},
		},
		"artifacts": []any{
			map[string]any{"name": "app", "size_in_bytes": int64(5 << 20), "expired": false},
			map[string]any{"name": "junit", "size_in_bytes": int64(1536), "expired": false},
		},
	}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("structured result (-want +got):\n%s", diff)
	}
}

// TestLogTailLinesZero checks that log_tail_lines: 0 leaves logs out.
func TestLogTailLinesZero(t *testing.T) {
	f := newFixture(t, fixtureOptions{scripts: map[string]githubfake.Script{"failure": twoJobs("failure")}})
	a := f.adapter(func(_ *BackendConfig, tools map[string]JobConfig) {
		tc := tools["scripted"]
		tc.LogTailLines = new(0)
		tools["scripted"] = tc
	})
	ref := f.start(a, "scripted", map[string]any{"script": "failure"}, "corr-nologs")
	f.clock.Advance(time.Hour)
	o := f.poll(a, ref)
	if o.State != adapters.StateToolError || strings.Contains(o.Result.Text, "log of job") {
		t.Errorf("observation = %v, text:\n%s\nwant a tool error without logs", o.State, o.Result.Text)
	}
}

// TestRerunAfterTerminal checks that the adapter reports a re-run as it is
// (the bridge keeps the first terminal observation).
func TestRerunAfterTerminal(t *testing.T) {
	f := newFixture(t, fixtureOptions{scripts: map[string]githubfake.Script{"success": twoJobs("success")}})
	a := f.adapter(nil)
	ref := f.start(a, "scripted", map[string]any{"script": "success"}, "corr-rerun")
	f.clock.Advance(time.Hour)
	if o := f.poll(a, ref); o.State != adapters.StateSucceeded {
		t.Fatalf("before the re-run: %v %q", o.State, o.Message)
	}
	f.gh.Rerun(runID(t, ref))
	if o := f.poll(a, ref); o.State != adapters.StateWorking || o.Message != "queued: waiting for a runner" {
		t.Errorf("after the re-run: %v %q, want working, queued", o.State, o.Message)
	}
}

// TestUnknownRunIsNotFound checks that a deleted run is reported as not
// found, which the bridge turns into a bounded grace.
func TestUnknownRunIsNotFound(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	a := f.adapter(nil)
	ref := f.start(a, "succeeds", map[string]any{"branch": "main"}, "corr-gone")
	f.poll(a, ref)
	f.gh.Purge(runID(t, ref))
	o := f.pollErr(a, ref)
	if !errors.Is(o.Err, adapters.ErrJobNotFound) {
		t.Fatalf("Poll of a deleted run: %v", o.Err)
	}
}
