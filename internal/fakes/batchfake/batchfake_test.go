package batchfake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// t0 is when every test's fake clock starts.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeClock is a manually advanced clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixture is a fake behind a real loopback HTTP server with a fake clock, and
// the real SDK client pointed at it, its retries off.
type fixture struct {
	t      *testing.T
	clock  *fakeClock
	srv    *Server
	url    string
	client *batch.Client
}

func newFixture(t *testing.T, opts *Options) *fixture {
	t.Helper()
	clock := &fakeClock{now: t0}
	if opts == nil {
		opts = &Options{}
	}
	opts.Now = clock.Now
	srv := New(opts)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	client := batch.New(batch.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(hs.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", ""),
		RetryMaxAttempts: 1,
	})
	return &fixture{t: t, clock: clock, srv: srv, url: hs.URL, client: client}
}

// submit submits a job and returns its ID.
func (f *fixture) submit(in *batch.SubmitJobInput) string {
	f.t.Helper()
	if in.JobQueue == nil {
		in.JobQueue = aws.String("default")
	}
	if in.JobDefinition == nil {
		in.JobDefinition = aws.String("sleeper")
	}
	out, err := f.client.SubmitJob(f.t.Context(), in)
	if err != nil {
		f.t.Fatalf("SubmitJob: %v", err)
	}
	return aws.ToString(out.JobId)
}

func scripted(name, s string) *batch.SubmitJobInput {
	return &batch.SubmitJobInput{JobName: aws.String(name), Parameters: map[string]string{scriptKey: s}}
}

// describe describes one job; nil when the fake leaves it out.
func (f *fixture) describe(id string) *types.JobDetail {
	f.t.Helper()
	out, err := f.client.DescribeJobs(f.t.Context(), &batch.DescribeJobsInput{Jobs: []string{id}})
	if err != nil {
		f.t.Fatalf("DescribeJobs: %v", err)
	}
	if len(out.Jobs) == 0 {
		return nil
	}
	return &out.Jobs[0]
}

// seen is the part of a JobDetail the lifecycle tests compare.
type seen struct {
	Status     types.JobStatus
	Reason     string
	Exit       *int32
	Attempts   int
	Cancelled  bool
	Terminated bool
}

func (f *fixture) seen(id string) seen {
	f.t.Helper()
	d := f.describe(id)
	if d == nil {
		return seen{}
	}
	s := seen{
		Status: d.Status, Reason: aws.ToString(d.StatusReason), Attempts: len(d.Attempts),
		Cancelled: aws.ToBool(d.IsCancelled), Terminated: aws.ToBool(d.IsTerminated),
	}
	if d.Container != nil {
		s.Exit = d.Container.ExitCode
	}
	return s
}

func apiErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func TestLifecycles(t *testing.T) {
	exit := func(n int32) *int32 { return &n }
	type step struct {
		at   time.Duration
		want seen
	}
	tests := []struct {
		name  string
		in    *batch.SubmitJobInput
		steps []step
	}{{
		name: "default script succeeds",
		in:   &batch.SubmitJobInput{JobName: aws.String("plain")},
		steps: []step{
			{0, seen{Status: types.JobStatusSubmitted}},
			{600 * time.Millisecond, seen{Status: types.JobStatusRunnable}},
			{1500 * time.Millisecond, seen{Status: types.JobStatusStarting}},
			{2 * time.Second, seen{Status: types.JobStatusRunning}},
			{5 * time.Second, seen{Status: types.JobStatusSucceeded, Reason: reasonExited, Exit: exit(0), Attempts: 1}},
		},
	}, {
		name: "pending",
		in:   scripted("waits", "submitted=1s,pending=2s"),
		steps: []step{
			{time.Second, seen{Status: types.JobStatusPending}},
			{3 * time.Second, seen{Status: types.JobStatusRunnable}},
		},
	}, {
		name: "fails with its exit code after every retry",
		in: &batch.SubmitJobInput{
			JobName:       aws.String("flaky"),
			Parameters:    map[string]string{scriptKey: "submitted=0s,runnable=0s,starting=0s,running=1s,exit=3"},
			RetryStrategy: &types.RetryStrategy{Attempts: aws.Int32(3)},
		},
		steps: []step{
			{1500 * time.Millisecond, seen{Status: types.JobStatusRunning, Attempts: 1}},
			{3 * time.Second, seen{Status: types.JobStatusFailed, Reason: reasonExited, Exit: exit(3), Attempts: 3}},
		},
	}, {
		name: "back to RUNNABLE after a failed attempt with attempts left",
		in: &batch.SubmitJobInput{
			JobName:       aws.String("retried"),
			Parameters:    map[string]string{scriptKey: "submitted=0s,runnable=2s,starting=1s,running=10s,exit=1"},
			RetryStrategy: &types.RetryStrategy{Attempts: aws.Int32(3)},
		},
		steps: []step{
			{5 * time.Second, seen{Status: types.JobStatusRunning}},
			{14 * time.Second, seen{Status: types.JobStatusRunnable, Exit: exit(1), Attempts: 1}},
			{15500 * time.Millisecond, seen{Status: types.JobStatusStarting, Exit: exit(1), Attempts: 1}},
			{20 * time.Second, seen{Status: types.JobStatusRunning, Attempts: 1}},
			{27 * time.Second, seen{Status: types.JobStatusRunnable, Exit: exit(1), Attempts: 2}},
			{50 * time.Second, seen{Status: types.JobStatusFailed, Reason: reasonExited, Exit: exit(1), Attempts: 3}},
		},
	}, {
		name: "stuck in RUNNABLE with a reason",
		in:   scripted("stuck", "submitted=0s,runnable=1h,runnable_reason=CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"),
		steps: []step{
			{10 * time.Minute, seen{Status: types.JobStatusRunnable, Reason: "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"}},
		},
	}, {
		name: "attempt timeout",
		in: &batch.SubmitJobInput{
			JobName:       aws.String("slow"),
			Parameters:    map[string]string{scriptKey: "submitted=0s,runnable=0s,starting=0s,running=10m"},
			Timeout:       &types.JobTimeout{AttemptDurationSeconds: aws.Int32(60)},
			RetryStrategy: &types.RetryStrategy{Attempts: aws.Int32(2)},
		},
		steps: []step{
			{59 * time.Second, seen{Status: types.JobStatusRunning}},
			{61 * time.Second, seen{Status: types.JobStatusFailed, Reason: reasonTimeout, Attempts: 1}},
		},
	}, {
		name: "script in a tag",
		in: &batch.SubmitJobInput{
			JobName: aws.String("tagged"),
			Tags:    map[string]string{scriptKey: "submitted=0s,runnable=0s,starting=0s,running=1s,exit=7"},
		},
		steps: []step{{2 * time.Second, seen{Status: types.JobStatusFailed, Reason: reasonExited, Exit: exit(7), Attempts: 1}}},
	}, {
		name: "hidden right after submission",
		in:   scripted("shy", "hidden=2s,submitted=10s"),
		steps: []step{
			{time.Second, seen{}},
			{2 * time.Second, seen{Status: types.JobStatusSubmitted}},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			id := f.submit(tc.in)
			var elapsed time.Duration
			for _, s := range tc.steps {
				f.clock.Advance(s.at - elapsed)
				elapsed = s.at
				if diff := cmp.Diff(s.want, f.seen(id)); diff != "" {
					t.Errorf("at %v (-want +got):\n%s", s.at, diff)
				}
			}
		})
	}
}

func TestDetailFields(t *testing.T) {
	f := newFixture(t, nil)
	id := f.submit(&batch.SubmitJobInput{
		JobName:       aws.String("etl-run"),
		JobQueue:      aws.String("arn:aws:batch:us-east-1:123456789012:job-queue/etl"),
		JobDefinition: aws.String("etl:4"),
		Parameters:    map[string]string{"date": "2026-01-01", scriptKey: "submitted=0s,runnable=0s,starting=0s,running=1s"},
		ContainerOverrides: &types.ContainerOverrides{
			Command:              []string{"etl", "--date", "2026-01-01"},
			Environment:          []types.KeyValuePair{{Name: aws.String("MODE"), Value: aws.String("full")}},
			ResourceRequirements: []types.ResourceRequirement{{Type: types.ResourceTypeVcpu, Value: aws.String("2")}},
		},
		Tags:                       map[string]string{"team": "data"},
		ShareIdentifier:            aws.String("blue"),
		SchedulingPriorityOverride: aws.Int32(7),
	})
	f.clock.Advance(2 * time.Second)
	d := f.describe(id)
	got := map[string]any{
		"arn":        aws.ToString(d.JobArn),
		"queue":      aws.ToString(d.JobQueue),
		"definition": aws.ToString(d.JobDefinition),
		"createdAt":  aws.ToInt64(d.CreatedAt),
		"startedAt":  aws.ToInt64(d.StartedAt),
		"stoppedAt":  aws.ToInt64(d.StoppedAt),
		"command":    d.Container.Command,
		"env":        aws.ToString(d.Container.Environment[0].Value),
		"vcpu":       aws.ToString(d.Container.ResourceRequirements[0].Value),
		"log":        aws.ToString(d.Container.LogStreamName),
		"tags":       d.Tags,
		"share":      aws.ToString(d.ShareIdentifier),
		"priority":   aws.ToInt32(d.SchedulingPriority),
		"date":       d.Parameters["date"],
	}
	want := map[string]any{
		"arn":        "arn:aws:batch:us-east-1:123456789012:job/" + id,
		"queue":      "arn:aws:batch:us-east-1:123456789012:job-queue/etl",
		"definition": "arn:aws:batch:us-east-1:123456789012:job-definition/etl:4",
		"createdAt":  t0.UnixMilli(),
		"startedAt":  t0.UnixMilli(),
		"stoppedAt":  t0.Add(time.Second).UnixMilli(),
		"command":    []string{"etl", "--date", "2026-01-01"},
		"env":        "full",
		"vcpu":       "2",
		"log":        "etl/default/0000000100000000" + "0000000000000001",
		"tags":       map[string]string{"team": "data"},
		"share":      "blue",
		"priority":   int32(7),
		"date":       "2026-01-01",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JobDetail (-want +got):\n%s", diff)
	}
}

func TestDescribeJobs(t *testing.T) {
	f := newFixture(t, nil)
	a := f.submit(scripted("a", ""))
	b := f.submit(scripted("b", ""))
	out, err := f.client.DescribeJobs(t.Context(), &batch.DescribeJobsInput{Jobs: []string{b, "no-such-job", a, a + ":0"}})
	if err != nil {
		t.Fatalf("DescribeJobs: %v", err)
	}
	var ids []string
	for _, d := range out.Jobs {
		ids = append(ids, aws.ToString(d.JobId))
	}
	if diff := cmp.Diff([]string{b, a}, ids); diff != "" {
		t.Errorf("described jobs (-want +got):\n%s", diff)
	}

	many := make([]string, 101)
	for i := range many {
		many[i] = a
	}
	_, err = f.client.DescribeJobs(t.Context(), &batch.DescribeJobsInput{Jobs: many})
	if apiErrorCode(err) != "ClientException" || !strings.Contains(err.Error(), "Maximum number of jobs supported is 100") {
		t.Errorf("DescribeJobs of 101 IDs: %v, want ClientException about the maximum", err)
	}
	if got := f.srv.Calls(OpDescribeJobs); got != 2 {
		t.Errorf("Calls(DescribeJobs) = %d, want 2", got)
	}
}

func TestStopJobs(t *testing.T) {
	const s = "submitted=0s,runnable=10s,starting=0s,running=1m"
	exit143, exit137 := int32(exitTerminated), int32(exitKilled)
	tests := []struct {
		name      string
		script    string
		after     time.Duration // since submission, when the stop is sent
		terminate bool
		wait      time.Duration // after the stop
		want      seen
	}{
		{"terminate a running job that exits on SIGTERM", s + ",terminate_delay=0s", 20 * time.Second, true, 0,
			seen{Status: types.JobStatusFailed, Reason: "stop it", Exit: &exit143, Attempts: 1, Terminated: true}},
		{"terminate a running job that takes time to stop", s + ",terminate_delay=5s", 20 * time.Second, true, 4 * time.Second,
			seen{Status: types.JobStatusRunning}},
		{"terminated after the delay", s + ",terminate_delay=5s", 20 * time.Second, true, 5 * time.Second,
			seen{Status: types.JobStatusFailed, Reason: "stop it", Exit: &exit143, Attempts: 1, Terminated: true}},
		{"a container ignoring SIGTERM runs on for the 30s grace", s, 20 * time.Second, true, 29 * time.Second,
			seen{Status: types.JobStatusRunning}},
		{"a container ignoring SIGTERM is killed after the grace", s, 20 * time.Second, true, 30 * time.Second,
			seen{Status: types.JobStatusFailed, Reason: "stop it", Exit: &exit137, Attempts: 1, Terminated: true}},
		{"terminate a job between attempts cancels it", s + ",exit=1", 75 * time.Second, true, 0,
			seen{Status: types.JobStatusFailed, Reason: "stop it", Exit: new(int32(1)), Attempts: 1, Cancelled: true}},
		{"terminate a runnable job", s, 5 * time.Second, true, 0,
			seen{Status: types.JobStatusFailed, Reason: "stop it", Cancelled: true}},
		{"cancel a runnable job", s, 5 * time.Second, false, 0,
			seen{Status: types.JobStatusFailed, Reason: "stop it", Cancelled: true}},
		{"cancel does nothing to a running job", s, 20 * time.Second, false, 0,
			seen{Status: types.JobStatusRunning}},
		{"terminate a finished job", "submitted=0s,runnable=0s,starting=0s,running=1s", 5 * time.Second, true, 0,
			seen{Status: types.JobStatusSucceeded, Reason: reasonExited, Exit: new(int32(0)), Attempts: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			in := scripted("stop-me", tc.script)
			in.RetryStrategy = &types.RetryStrategy{Attempts: aws.Int32(2)}
			id := f.submit(in)
			f.clock.Advance(tc.after)
			var err error
			if tc.terminate {
				_, err = f.client.TerminateJob(t.Context(), &batch.TerminateJobInput{JobId: &id, Reason: aws.String("stop it")})
			} else {
				_, err = f.client.CancelJob(t.Context(), &batch.CancelJobInput{JobId: &id, Reason: aws.String("stop it")})
			}
			if err != nil {
				t.Fatalf("stopping: %v", err)
			}
			f.clock.Advance(tc.wait)
			if diff := cmp.Diff(tc.want, f.seen(id)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	t.Run("unknown job", func(t *testing.T) {
		f := newFixture(t, nil)
		_, err := f.client.TerminateJob(t.Context(), &batch.TerminateJobInput{JobId: aws.String("nope"), Reason: aws.String("x")})
		if apiErrorCode(err) != "ClientException" || !strings.Contains(err.Error(), "not found") {
			t.Errorf("TerminateJob(unknown) = %v, want a ClientException saying not found", err)
		}
	})
}

func TestArrayJob(t *testing.T) {
	f := newFixture(t, nil)
	id := f.submit(&batch.SubmitJobInput{
		JobName:         aws.String("fan-out"),
		Parameters:      map[string]string{scriptKey: "submitted=1s,runnable=0s,starting=0s,running=10s,stagger=10s,fail_children=1"},
		ArrayProperties: &types.ArrayProperties{Size: aws.Int32(3)},
	})
	summary := func() (types.JobStatus, map[string]int32) {
		d := f.describe(id)
		return d.Status, d.ArrayProperties.StatusSummary
	}
	counts := func(runnable, running, succeeded, failed int32) map[string]int32 {
		return map[string]int32{"SUBMITTED": 0, "PENDING": 0, "RUNNABLE": runnable, "STARTING": 0, "RUNNING": running, "SUCCEEDED": succeeded, "FAILED": failed}
	}
	steps := []struct {
		at      time.Duration
		status  types.JobStatus
		summary map[string]int32
	}{
		{0, types.JobStatusSubmitted, nil},
		{5 * time.Second, types.JobStatusPending, counts(2, 1, 0, 0)},
		{15 * time.Second, types.JobStatusPending, counts(1, 1, 0, 1)},
		{25 * time.Second, types.JobStatusPending, counts(0, 1, 1, 1)},
		{31 * time.Second, types.JobStatusFailed, counts(0, 0, 2, 1)},
	}
	var elapsed time.Duration
	for _, s := range steps {
		f.clock.Advance(s.at - elapsed)
		elapsed = s.at
		st, sum := summary()
		if st != s.status || !cmp.Equal(s.summary, sum, cmpopts.EquateEmpty()) {
			t.Errorf("at %v: %s %v, want %s %v", s.at, st, sum, s.status, s.summary)
		}
	}
	if d := f.describe(id); aws.ToString(d.StatusReason) != reasonArrayChild {
		t.Errorf("parent reason %q, want %q", aws.ToString(d.StatusReason), reasonArrayChild)
	}
	child := f.describe(id + ":0")
	if child == nil || child.Status != types.JobStatusFailed || aws.ToInt32(child.ArrayProperties.Index) != 0 {
		t.Errorf("child 0 = %+v, want FAILED with index 0", child)
	}
	list, err := f.client.ListJobs(t.Context(), &batch.ListJobsInput{ArrayJobId: &id, JobStatus: types.JobStatusSucceeded})
	if err != nil || len(list.JobSummaryList) != 2 {
		t.Errorf("ListJobs(arrayJobId, SUCCEEDED) = %d jobs, %v; want 2", len(list.JobSummaryList), err)
	}
}

func TestDependencies(t *testing.T) {
	f := newFixture(t, nil)
	first := f.submit(scripted("first", "submitted=0s,runnable=0s,starting=0s,running=10s,exit=1"))
	ok := f.submit(scripted("ok", "submitted=0s,runnable=0s,starting=0s,running=5s"))
	after := f.submit(&batch.SubmitJobInput{
		JobName:    aws.String("after-ok"),
		Parameters: map[string]string{scriptKey: "submitted=0s,runnable=0s,starting=0s,running=5s"},
		DependsOn:  []types.JobDependency{{JobId: &ok}},
	})
	doomed := f.submit(&batch.SubmitJobInput{
		JobName:    aws.String("after-first"),
		Parameters: map[string]string{scriptKey: "submitted=0s"},
		DependsOn:  []types.JobDependency{{JobId: &first}},
	})
	f.clock.Advance(4 * time.Second)
	if got := f.seen(after).Status; got != types.JobStatusPending {
		t.Errorf("dependant of a running job is %s, want PENDING", got)
	}
	f.clock.Advance(2 * time.Second)
	if got := f.seen(after).Status; got != types.JobStatusRunning {
		t.Errorf("dependant of a finished job is %s, want RUNNING", got)
	}
	f.clock.Advance(5 * time.Second)
	if diff := cmp.Diff(seen{Status: types.JobStatusFailed, Reason: reasonDependency}, f.seen(doomed)); diff != "" {
		t.Errorf("dependant of a failed job (-want +got):\n%s", diff)
	}
	_, err := f.client.SubmitJob(t.Context(), &batch.SubmitJobInput{
		JobName: aws.String("x"), JobQueue: aws.String("q"), JobDefinition: aws.String("d"),
		DependsOn: []types.JobDependency{{JobId: aws.String("no-such-job")}},
	})
	if apiErrorCode(err) != "ClientException" {
		t.Errorf("dependency on an unknown job: %v, want ClientException", err)
	}
}

func TestListJobs(t *testing.T) {
	f := newFixture(t, nil)
	var ids []string
	for i, name := range []string{"jb-AbC-report", "jb-abc-retry", "jb-xyz-report", "other"} {
		ids = append(ids, f.submit(scripted(name, "submitted=0s,runnable=0s,starting=0s,running=1h")))
		f.clock.Advance(time.Duration(i+1) * time.Millisecond)
	}
	f.submit(&batch.SubmitJobInput{JobName: aws.String("jb-abc-elsewhere"), JobQueue: aws.String("another")})
	f.clock.Advance(defaultListingLag)

	list := func(in *batch.ListJobsInput) ([]string, error) {
		out, err := f.client.ListJobs(t.Context(), in)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, s := range out.JobSummaryList {
			names = append(names, aws.ToString(s.JobName))
		}
		return names, nil
	}
	byName := func(v string) *batch.ListJobsInput {
		return &batch.ListJobsInput{JobQueue: aws.String("default"), Filters: []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{v}}}}
	}
	tests := []struct {
		name string
		in   *batch.ListJobsInput
		want []string
		code string
	}{
		{"prefix, case-insensitive, newest first", byName("JB-ABC-*"), []string{"jb-abc-retry", "jb-AbC-report"}, ""},
		{"exact name", byName("other"), []string{"other"}, ""},
		{"no match", byName("nothing*"), nil, ""},
		{"queue ARN, running jobs", &batch.ListJobsInput{JobQueue: aws.String("arn:aws:batch:us-east-1:123456789012:job-queue/default")},
			[]string{"other", "jb-xyz-report", "jb-abc-retry", "jb-AbC-report"}, ""},
		{"created after", &batch.ListJobsInput{JobQueue: aws.String("default"), Filters: []types.KeyValuesPair{{Name: aws.String("AFTER_CREATED_AT"), Values: []string{fmt.Sprint(t0.Add(time.Millisecond).UnixMilli())}}}},
			[]string{"other", "jb-xyz-report"}, ""},
		{"no queue", &batch.ListJobsInput{}, nil, "ClientException"},
		{"two filters", &batch.ListJobsInput{JobQueue: aws.String("default"), Filters: []types.KeyValuesPair{
			{Name: aws.String("JOB_NAME"), Values: []string{"a"}}, {Name: aws.String("JOB_DEFINITION"), Values: []string{"b"}}}}, nil, "ClientException"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := list(tc.in)
			if apiErrorCode(err) != tc.code {
				t.Fatalf("ListJobs: %v, want error code %q", err, tc.code)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	t.Run("pages", func(t *testing.T) {
		p := batch.NewListJobsPaginator(f.client, &batch.ListJobsInput{JobQueue: aws.String("default"), MaxResults: aws.Int32(3)})
		var pages, jobs int
		for p.HasMorePages() {
			out, err := p.NextPage(t.Context())
			if err != nil {
				t.Fatalf("NextPage: %v", err)
			}
			pages++
			jobs += len(out.JobSummaryList)
		}
		if pages != 2 || jobs != 4 {
			t.Errorf("%d pages with %d jobs, want 2 pages with 4 jobs", pages, jobs)
		}
	})
}

func TestSubmitValidation(t *testing.T) {
	valid := func() *batch.SubmitJobInput {
		return &batch.SubmitJobInput{JobName: aws.String("ok"), JobQueue: aws.String("default"), JobDefinition: aws.String("d")}
	}
	tests := []struct {
		name   string
		modify func(*batch.SubmitJobInput)
		want   string
	}{
		{"name starts with a hyphen", func(in *batch.SubmitJobInput) { in.JobName = aws.String("-x") }, "jobName"},
		{"name too long", func(in *batch.SubmitJobInput) { in.JobName = aws.String(strings.Repeat("a", 129)) }, "jobName"},
		{"name with a dot", func(in *batch.SubmitJobInput) { in.JobName = aws.String("a.b") }, "jobName"},
		{"unknown queue", func(in *batch.SubmitJobInput) { in.JobQueue = aws.String("nope") }, "Job Queue nope not found"},
		{"array of one", func(in *batch.SubmitJobInput) { in.ArrayProperties = &types.ArrayProperties{Size: aws.Int32(1)} }, "arrayProperties.size"},
		{"short timeout", func(in *batch.SubmitJobInput) {
			in.Timeout = &types.JobTimeout{AttemptDurationSeconds: aws.Int32(59)}
		}, "attemptDurationSeconds"},
		{"eleven attempts", func(in *batch.SubmitJobInput) {
			in.RetryStrategy = &types.RetryStrategy{Attempts: aws.Int32(11)}
		}, "retryStrategy.attempts"},
		{"bad script", func(in *batch.SubmitJobInput) { in.Parameters = map[string]string{scriptKey: "explode=1"} }, "unknown directive"},
		{"bad duration", func(in *batch.SubmitJobInput) { in.Parameters = map[string]string{scriptKey: "running=forever"} }, "running"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, &Options{Queues: []string{"default"}})
			in := valid()
			tc.modify(in)
			_, err := f.client.SubmitJob(t.Context(), in)
			if apiErrorCode(err) != "ClientException" || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("SubmitJob: %v, want a ClientException mentioning %q", err, tc.want)
			}
			if n := f.srv.JobsNamed(aws.ToString(in.JobName)); n != 0 {
				t.Errorf("%d jobs created, want 0", n)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	t.Run("throttling storm", func(t *testing.T) {
		f := newFixture(t, nil)
		id := f.submit(scripted("a", ""))
		f.srv.Inject(Fault{Operation: OpDescribeJobs, Times: 3, Status: http.StatusTooManyRequests})
		for i := range 3 {
			_, err := f.client.DescribeJobs(t.Context(), &batch.DescribeJobsInput{Jobs: []string{id}})
			if apiErrorCode(err) != "TooManyRequestsException" {
				t.Fatalf("call %d: %v, want TooManyRequestsException", i, err)
			}
		}
		if f.describe(id) == nil {
			t.Errorf("the storm did not end")
		}
	})
	t.Run("throttling with retry-after until cleared", func(t *testing.T) {
		f := newFixture(t, nil)
		id := f.submit(scripted("a", ""))
		f.srv.Inject(Fault{Times: 1000, Status: http.StatusTooManyRequests, RetryAfter: 1500 * time.Millisecond})
		for _, op := range []func() error{
			func() error {
				_, err := f.client.DescribeJobs(t.Context(), &batch.DescribeJobsInput{Jobs: []string{id}})
				return err
			},
			func() error {
				_, err := f.client.TerminateJob(t.Context(), &batch.TerminateJobInput{JobId: &id, Reason: aws.String("x")})
				return err
			},
		} {
			err := op()
			var re *awshttp.ResponseError
			if apiErrorCode(err) != "TooManyRequestsException" || !errors.As(err, &re) || re.Response.Header.Get("Retry-After") != "2" {
				t.Fatalf("%v, want TooManyRequestsException with Retry-After: 2 (rounded up)", err)
			}
		}
		f.srv.ClearFaults()
		if f.describe(id) == nil {
			t.Errorf("the storm did not end with ClearFaults")
		}
	})
	t.Run("crash-time duplicate", func(t *testing.T) {
		f := newFixture(t, nil)
		f.srv.Inject(Fault{Operation: OpSubmitJob, AfterHandling: true})
		_, err := f.client.SubmitJob(t.Context(), &batch.SubmitJobInput{JobName: aws.String("jb-c1-x"), JobQueue: aws.String("q"), JobDefinition: aws.String("d")})
		if apiErrorCode(err) != "ServerException" {
			t.Fatalf("SubmitJob: %v, want ServerException", err)
		}
		if n := f.srv.JobsNamed("jb-c1-x"); n != 1 {
			t.Errorf("JobsNamed = %d, want 1: the job exists despite the error", n)
		}
	})
	t.Run("dropped connection", func(t *testing.T) {
		f := newFixture(t, nil)
		f.srv.Inject(Fault{Operation: OpListJobs, Drop: true})
		_, err := f.client.ListJobs(t.Context(), &batch.ListJobsInput{JobQueue: aws.String("q")})
		if err == nil {
			t.Fatalf("ListJobs succeeded through a dropped connection")
		}
		if _, err := f.client.ListJobs(t.Context(), &batch.ListJobsInput{JobQueue: aws.String("q")}); err != nil {
			t.Errorf("ListJobs after the fault: %v", err)
		}
	})
}

func TestPurgeAndRetention(t *testing.T) {
	f := newFixture(t, &Options{Retention: time.Hour})
	a := f.submit(scripted("a", "submitted=0s,runnable=0s,starting=0s,running=1s"))
	b := f.submit(scripted("b", "submitted=0s,runnable=0s,starting=0s,running=1s"))
	f.srv.Purge(a)
	if f.describe(a) != nil {
		t.Errorf("a purged job is still described")
	}
	f.clock.Advance(time.Hour)
	if f.describe(b) == nil {
		t.Errorf("job expired before its retention ended")
	}
	f.clock.Advance(time.Second)
	if f.describe(b) != nil {
		t.Errorf("job still described after its retention")
	}
	if _, err := f.client.TerminateJob(t.Context(), &batch.TerminateJobInput{JobId: &b, Reason: aws.String("x")}); apiErrorCode(err) != "ClientException" {
		t.Errorf("TerminateJob(expired) = %v, want ClientException", err)
	}
}

func TestQueueSnapshot(t *testing.T) {
	f := newFixture(t, nil)
	first := f.submit(scripted("first", "submitted=0s,runnable=1h"))
	f.clock.Advance(time.Second)
	second := f.submit(scripted("second", "submitted=0s,runnable=1h"))
	f.submit(scripted("running", "submitted=0s,runnable=0s,starting=0s,running=1h"))
	out, err := f.client.GetJobQueueSnapshot(t.Context(), &batch.GetJobQueueSnapshotInput{JobQueue: aws.String("default")})
	if err != nil {
		t.Fatalf("GetJobQueueSnapshot: %v", err)
	}
	var arns []string
	for _, j := range out.FrontOfQueue.Jobs {
		arns = append(arns, aws.ToString(j.JobArn))
	}
	want := []string{f.srv.arn("job/" + first), f.srv.arn("job/" + second)}
	if diff := cmp.Diff(want, arns); diff != "" {
		t.Errorf("front of queue (-want +got):\n%s", diff)
	}
}

func TestWireErrors(t *testing.T) {
	notRecorded(t)
	f := newFixture(t, nil)
	tests := []struct {
		name, method, path, auth string
		status                   int
		code                     string
	}{
		{"unsigned", http.MethodPost, "/v1/describejobs", "", http.StatusForbidden, "UnrecognizedClientException"},
		{"unknown operation", http.MethodPost, "/v1/explode", "AWS4-HMAC-SHA256 Credential=x", http.StatusNotFound, "UnknownOperationException"},
		{"wrong method", http.MethodGet, "/v1/describejobs", "AWS4-HMAC-SHA256 Credential=x", http.StatusNotFound, "UnknownOperationException"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tc.method, f.url+tc.path, strings.NewReader(`{"jobs":["x"]}`))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.method, tc.path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || resp.Header.Get("X-Amzn-ErrorType") != tc.code || !strings.Contains(string(body), `"__type":"`+tc.code+`"`) {
				t.Errorf("got %d %q %s, want %d %q", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), body, tc.status, tc.code)
			}
		})
	}
}

func TestStartAndClose(t *testing.T) {
	srv := New(nil)
	url, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if _, err := srv.Start("127.0.0.1:0"); err == nil {
		t.Errorf("a second Start succeeded")
	}
	client := batch.New(batch.Options{
		Region: "eu-west-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", ""),
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	out, err := client.SubmitJob(ctx, &batch.SubmitJobInput{JobName: aws.String("a"), JobQueue: aws.String("q"), JobDefinition: aws.String("d")})
	if err != nil || aws.ToString(out.JobId) == "" {
		t.Fatalf("SubmitJob over Start's listener: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestCancelWaitsForDependencies checks the service model's rule: "a
// PENDING job is canceled after all dependency jobs are completed". A
// CancelJob or TerminateJob of a job held by a running dependency answers
// at once, but the job stays PENDING until the dependency finishes, and only
// then ends FAILED, cancelled, with the reason.
func TestCancelWaitsForDependencies(t *testing.T) {
	for _, terminate := range []bool{false, true} {
		t.Run(fmt.Sprintf("terminate=%v", terminate), func(t *testing.T) {
			f := newFixture(t, nil)
			dep := f.submit(scripted("dep", "submitted=0s,runnable=0s,starting=0s,running=1m"))
			held := f.submit(&batch.SubmitJobInput{
				JobName:    aws.String("held"),
				Parameters: map[string]string{scriptKey: "submitted=0s,runnable=0s,starting=0s,running=1m"},
				DependsOn:  []types.JobDependency{{JobId: &dep}},
			})
			f.clock.Advance(10 * time.Second)
			var err error
			if terminate {
				_, err = f.client.TerminateJob(t.Context(), &batch.TerminateJobInput{JobId: &held, Reason: aws.String("stop it")})
			} else {
				_, err = f.client.CancelJob(t.Context(), &batch.CancelJobInput{JobId: &held, Reason: aws.String("stop it")})
			}
			if err != nil {
				t.Fatalf("stopping: %v", err)
			}
			f.clock.Advance(49 * time.Second)
			if diff := cmp.Diff(seen{Status: types.JobStatusPending}, f.seen(held)); diff != "" {
				t.Errorf("while the dependency runs (-want +got):\n%s", diff)
			}
			f.clock.Advance(time.Second)
			if diff := cmp.Diff(seen{Status: types.JobStatusFailed, Reason: "stop it", Cancelled: true}, f.seen(held)); diff != "" {
				t.Errorf("once the dependency finished (-want +got):\n%s", diff)
			}
			if d := f.describe(held); aws.ToInt64(d.StoppedAt) != t0.Add(time.Minute).UnixMilli() {
				t.Errorf("stoppedAt = %d, want the dependency's end %d", aws.ToInt64(d.StoppedAt), t0.Add(time.Minute).UnixMilli())
			}
		})
	}
}

// TestListJobsLags checks that ListJobs leaves a new job out for the
// listing lag while DescribeJobs already answers for it.
func TestListJobsLags(t *testing.T) {
	tests := []struct {
		name string
		lag  time.Duration
		want time.Duration // first moment it is listed
	}{
		{"default", 0, defaultListingLag},
		{"configured", 5 * time.Second, 5 * time.Second},
		{"none", -1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, &Options{ListingLag: tc.lag})
			id := f.submit(scripted("jb-lag-x", ""))
			listed := func() bool {
				out, err := f.client.ListJobs(t.Context(), &batch.ListJobsInput{JobQueue: aws.String("default"),
					Filters: []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{"jb-lag-*"}}}})
				if err != nil {
					t.Fatalf("ListJobs: %v", err)
				}
				return len(out.JobSummaryList) == 1
			}
			if tc.want > 0 {
				f.clock.Advance(tc.want - time.Millisecond)
				if listed() {
					t.Errorf("listed %v after submission, want only from %v", tc.want-time.Millisecond, tc.want)
				}
				if f.describe(id) == nil {
					t.Errorf("DescribeJobs leaves the job out during the listing lag")
				}
				f.clock.Advance(time.Millisecond)
			}
			if !listed() {
				t.Errorf("not listed %v after submission", tc.want)
			}
		})
	}
}

// TestListJobsFilters checks the JOB_DEFINITION filter (every revision of a
// name, case-sensitive, a trailing * for a prefix, an ARN for one
// revision) and SHARE_IDENTIFIER (which, alone among filters, combines with
// jobStatus).
func TestListJobsFilters(t *testing.T) {
	f := newFixture(t, nil)
	const run = "submitted=0s,runnable=0s,starting=0s,running=1h"
	for _, j := range []struct{ name, def, share, script string }{
		{"etl-1", "etl:1", "blue", run},
		{"etl-2", "arn:aws:batch:us-east-1:123456789012:job-definition/etl:2", "green", run},
		{"etl-upper", "ETL", "blue", run},
		{"etl2", "etl2", "blue", "submitted=0s,runnable=1h"},
		{"plain", "etl", "", run},
	} {
		in := scripted(j.name, j.script)
		in.JobDefinition = aws.String(j.def)
		if j.share != "" {
			in.ShareIdentifier = aws.String(j.share)
		}
		f.submit(in)
		f.clock.Advance(time.Millisecond)
	}
	f.clock.Advance(defaultListingLag)
	filter := func(name, value string, status types.JobStatus) *batch.ListJobsInput {
		return &batch.ListJobsInput{JobQueue: aws.String("default"), JobStatus: status,
			Filters: []types.KeyValuesPair{{Name: aws.String(name), Values: []string{value}}}}
	}
	tests := []struct {
		name string
		in   *batch.ListJobsInput
		want []string
		code string
	}{
		{"definition name: every revision, case-sensitive", filter("JOB_DEFINITION", "etl", ""), []string{"plain", "etl-2", "etl-1"}, ""},
		{"definition prefix", filter("JOB_DEFINITION", "etl*", ""), []string{"plain", "etl2", "etl-2", "etl-1"}, ""},
		{"definition in upper case", filter("JOB_DEFINITION", "ETL", ""), []string{"etl-upper"}, ""},
		{"definition ARN: that revision", filter("JOB_DEFINITION", "arn:aws:batch:us-east-1:123456789012:job-definition/etl:1", ""), []string{"plain", "etl-1"}, ""}, // "etl" ran revision 1
		{"definition ARN with an asterisk", filter("JOB_DEFINITION", "arn:aws:batch:us-east-1:123456789012:job-definition/etl*", ""), nil, "ClientException"},
		{"share identifier, every status", filter("SHARE_IDENTIFIER", "blue", ""), []string{"etl2", "etl-upper", "etl-1"}, ""},
		{"share identifier with jobStatus", filter("SHARE_IDENTIFIER", "blue", types.JobStatusRunnable), []string{"etl2"}, ""},
		{"another filter ignores jobStatus", filter("JOB_DEFINITION", "etl2", types.JobStatusRunning), []string{"etl2"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := f.client.ListJobs(t.Context(), tc.in)
			if apiErrorCode(err) != tc.code {
				t.Fatalf("ListJobs: %v, want error code %q", err, tc.code)
			}
			var names []string
			if out != nil {
				for _, s := range out.JobSummaryList {
					names = append(names, aws.ToString(s.JobName))
				}
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestErrorAnswers checks the answers the service model describes:
// ServerException is an HTTP 500 (also when a test asks for another status
// with that code), other server errors get codes of their own, and every
// answer, success or error, carries an x-amzn-RequestId.
func TestErrorAnswers(t *testing.T) {
	tests := []struct {
		name       string
		fault      *Fault
		wantStatus int
		wantCode   string
	}{
		{"success", nil, http.StatusOK, ""},
		{"default fault", &Fault{}, http.StatusInternalServerError, "ServerException"},
		{"ServerException is a 500", &Fault{Status: http.StatusBadGateway, Code: "ServerException"}, http.StatusInternalServerError, "ServerException"},
		{"503", &Fault{Status: http.StatusServiceUnavailable}, http.StatusServiceUnavailable, "ServiceUnavailable"},
		{"throttled", &Fault{Status: http.StatusTooManyRequests}, http.StatusTooManyRequests, "TooManyRequestsException"},
		{"403", &Fault{Status: http.StatusForbidden}, http.StatusForbidden, "AccessDeniedException"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			if tc.fault != nil {
				f.srv.Inject(*tc.fault)
			}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, f.url+"/v1/describejobs", strings.NewReader(`{"jobs":[]}`))
			req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=x")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus || resp.Header.Get("X-Amzn-ErrorType") != tc.wantCode {
				t.Errorf("answer %d %q, want %d %q", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), tc.wantStatus, tc.wantCode)
			}
			if id := resp.Header.Get("x-amzn-RequestId"); !uuidRE.MatchString(id) {
				t.Errorf("x-amzn-RequestId = %q, want a UUID", id)
			}
		})
	}

	t.Run("the SDK reads the request ID", func(t *testing.T) {
		f := newFixture(t, nil)
		out, err := f.client.DescribeJobs(t.Context(), &batch.DescribeJobsInput{Jobs: []string{}})
		if err != nil {
			t.Fatalf("DescribeJobs: %v", err)
		}
		if id, ok := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata); !ok || !uuidRE.MatchString(id) {
			t.Errorf("request ID = %q (%v), want a UUID", id, ok)
		}
	})
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestExchangeRecording checks that with ExchangeDir every exchange is
// appended to batch-<pid>.jsonl in the shared format: operation named,
// credentials left out, injected faults marked.
func TestExchangeRecording(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, &Options{ExchangeDir: dir})
	id := f.submit(scripted("recorded", ""))
	f.srv.Inject(Fault{Operation: OpDescribeJobs, Status: http.StatusTooManyRequests})
	if _, err := f.client.DescribeJobs(t.Context(), &batch.DescribeJobsInput{Jobs: []string{id}}); apiErrorCode(err) != "TooManyRequestsException" {
		t.Fatalf("DescribeJobs: %v, want the injected throttling", err)
	}
	f.describe(id)

	raw, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("batch-%d.jsonl", os.Getpid())))
	if err != nil {
		t.Fatalf("reading the exchanges: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	type line struct {
		Backend, Method, Path, Operation string
		Status                           int
		Injected                         bool
		RequestHeaders                   http.Header `json:"request_headers"`
		ResponseHeaders                  http.Header `json:"response_headers"`
		RequestBody                      string      `json:"request_body"`
		ResponseBody                     string      `json:"response_body"`
	}
	var got []line
	for _, l := range lines {
		var x line
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, x)
	}
	if len(got) != 3 {
		t.Fatalf("%d exchanges recorded, want 3:\n%s", len(got), raw)
	}
	type summary struct {
		Backend, Method, Path, Operation string
		Status                           int
		Injected                         bool
	}
	want := []summary{
		{"batch", "POST", "/v1/submitjob", OpSubmitJob, 200, false},
		{"batch", "POST", "/v1/describejobs", OpDescribeJobs, 429, true},
		{"batch", "POST", "/v1/describejobs", OpDescribeJobs, 200, false},
	}
	for i, x := range got {
		if diff := cmp.Diff(want[i], summary{x.Backend, x.Method, x.Path, x.Operation, x.Status, x.Injected}); diff != "" {
			t.Errorf("exchange %d (-want +got):\n%s", i, diff)
		}
		if x.RequestHeaders.Get("Authorization") != "" {
			t.Errorf("exchange %d records the Authorization header", i)
		}
		if x.RequestHeaders.Get("Content-Type") != "application/json" || len(x.ResponseHeaders["x-amzn-RequestId"]) != 1 {
			t.Errorf("exchange %d headers: request %v, response %v", i, x.RequestHeaders, x.ResponseHeaders)
		}
		if !json.Valid([]byte(x.RequestBody)) || !json.Valid([]byte(x.ResponseBody)) {
			t.Errorf("exchange %d bodies are not the JSON sent: %q, %q", i, x.RequestBody, x.ResponseBody)
		}
	}
	if !strings.Contains(got[2].ResponseBody, id) {
		t.Errorf("DescribeJobs answer recorded as %q, want the job", got[2].ResponseBody)
	}
}

// notRecorded keeps a test's exchanges out of the spec checks'
// recordings: the test sends requests the Batch service model does not
// describe (unsigned, unknown operations, wrong methods), on purpose, to
// check that the fake answers them as the service does.
func notRecorded(t *testing.T) {
	t.Setenv(ExchangesEnv, "")
}
