package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/taskclient"
)

// scrape is one read of a bridge's /metrics, parsed.
type scrape map[string]*dto.MetricFamily

func scrapeMetrics(t *testing.T, h *harness) scrape {
	t.Helper()
	rec := httptest.NewRecorder()
	h.bridge.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// series returns the metric of family name whose labels are exactly
// labels ("k=v" pairs), or nil.
func (s scrape) series(name string, labels ...string) *dto.Metric {
	f := s[name]
	if f == nil {
		return nil
	}
	slices.Sort(labels)
	for _, m := range f.GetMetric() {
		var got []string
		for _, l := range m.GetLabel() {
			got = append(got, l.GetName()+"="+l.GetValue())
		}
		slices.Sort(got)
		if slices.Equal(got, labels) {
			return m
		}
	}
	return nil
}

// value is a counter's or gauge's value, or a histogram's count; -1 when the
// series is missing.
func (s scrape) value(name string, labels ...string) float64 {
	m := s.series(name, labels...)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return -1
}

func (s scrape) want(t *testing.T, v float64, name string, labels ...string) {
	t.Helper()
	if got := s.value(name, labels...); got != v {
		t.Errorf("%s{%s} = %v, want %v", name, strings.Join(labels, ","), got, v)
	}
}

func (s scrape) wantPositive(t *testing.T, name string, labels ...string) {
	t.Helper()
	if got := s.value(name, labels...); got <= 0 {
		t.Errorf("%s{%s} = %v, want > 0", name, strings.Join(labels, ","), got)
	}
}

// TestMetricsAfterCalls runs what an operator's dashboard watches (a job
// that succeeds, one that fails, one cancelled, a call refused by a limit)
// and reads the series back from /metrics.
func TestMetricsAfterCalls(t *testing.T) {
	h := newHarness(t, harnessOptions{sweep: 50 * time.Millisecond, tune: func(c *catalog.Catalog) {
		c.Limits.MaxArgumentBytes = 200
	}})
	ctx := t.Context()

	// Before any call every tool's series is there, at zero.
	before := scrapeMetrics(t, h)
	before.want(t, 0, "jobbridge_tasks_created_total", "tool=slow_compute")
	before.want(t, 0, "jobbridge_tasks_live", "tool=long_job", "state=working")
	for _, limit := range []string{"request_size", "argument_size", "create_rate", "live_tasks", "poll_rate", "scope", "tool_denied", "input_wait"} {
		before.want(t, 0, "jobbridge_limit_rejections_total", "limit="+limit)
	}

	ok := h.createTask("slow_compute", map[string]any{"seconds": 0.1, "label": "m"})
	bad := h.createTask("failing_job", nil)
	long := h.createTask("long_job", nil)
	h.waitTerminal(ok.TaskID)
	h.waitTerminal(bad.TaskID)
	h.waitFor(long.TaskID, "submitted", func(tk *taskclient.Task) bool {
		return strings.Contains(tk.StatusMessage, "job-") || strings.Contains(tk.StatusMessage, "running")
	})
	mid := scrapeMetrics(t, h)
	mid.want(t, 1, "jobbridge_tasks_live", "tool=long_job", "state=working")
	mid.want(t, 0, "jobbridge_tasks_live", "tool=slow_compute", "state=working")

	if err := h.tasks.CancelTask(ctx, long.TaskID); err != nil {
		t.Fatal(err)
	}
	if got := h.waitTerminal(long.TaskID); got.Status != "cancelled" {
		t.Fatalf("long_job ended %s, want cancelled", got.Status)
	}
	res, err := h.tasks.CallTool(ctx, "slow_compute", map[string]any{"seconds": 1, "label": strings.Repeat("x", 300)}, nil)
	if err != nil || res.Result == nil || !res.Result.IsError {
		t.Fatalf("oversized arguments: %v %+v, want an isError result", err, res)
	}
	// Let a sweep end after the calls.
	time.Sleep(150 * time.Millisecond)

	s := scrapeMetrics(t, h)
	for _, tool := range []string{"slow_compute", "failing_job", "long_job"} {
		s.want(t, 1, "jobbridge_tasks_created_total", "tool="+tool)
		s.want(t, 0, "jobbridge_tasks_live", "tool="+tool, "state=working")
	}
	s.want(t, 1, "jobbridge_limit_rejections_total", "limit=argument_size")

	s.want(t, 1, "jobbridge_tasks_finished_total", "tool=slow_compute", "outcome=succeeded")
	s.want(t, 1, "jobbridge_tasks_finished_total", "tool=failing_job", "outcome=tool_error")
	s.want(t, 1, "jobbridge_tasks_finished_total", "tool=long_job", "outcome=cancelled")
	s.want(t, 1, "jobbridge_task_duration_seconds", "tool=slow_compute", "outcome=succeeded")
	if m := s.series("jobbridge_task_duration_seconds", "tool=slow_compute", "outcome=succeeded"); m != nil && m.Histogram.GetSampleSum() < 0.1 {
		t.Errorf("slow_compute took %vs by the histogram, want at least its 0.1s", m.Histogram.GetSampleSum())
	}
	s.want(t, 1, "jobbridge_task_transitions_total", "tool=long_job", "from=working", "to=cancelled")

	s.want(t, 3, "jobbridge_backend_requests_total", "backend=jobs", "operation=start", "outcome=ok")
	s.want(t, 1, "jobbridge_backend_requests_total", "backend=jobs", "operation=cancel", "outcome=ok")
	s.wantPositive(t, "jobbridge_backend_requests_total", "backend=jobs", "operation=poll", "outcome=ok")
	s.want(t, 3, "jobbridge_backend_request_duration_seconds", "backend=jobs", "operation=start")
	s.want(t, 1, "jobbridge_cancel_forwards_total", "backend=jobs", "outcome=sent")

	s.wantPositive(t, "jobbridge_task_observations_served_total", "tool=slow_compute", "source=backend")
	s.want(t, 3, "jobbridge_store_operation_duration_seconds", "operation=create")
	s.wantPositive(t, "jobbridge_store_operation_duration_seconds", "operation=update")
	s.wantPositive(t, "jobbridge_store_operations_total", "operation=get", "outcome=ok")

	s.wantPositive(t, "jobbridge_sweep_duration_seconds")
	s.wantPositive(t, "jobbridge_sweep_last_run_timestamp_seconds")
	s.want(t, 0, "jobbridge_sweep_backlog_tasks")

	// The Go runtime and process collectors.
	s.wantPositive(t, "go_goroutines")
	if s["process_cpu_seconds_total"] == nil && s["process_start_time_seconds"] == nil {
		t.Error("no process_* metrics")
	}
	// No label carries a task ID, a principal or a job ID.
	for name, f := range s {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v := l.GetValue(); strings.Contains(v, ok.TaskID) || v == "anonymous" || strings.HasPrefix(v, "job-") || strings.HasPrefix(v, "jb-") {
					t.Errorf("%s has label %s=%q", name, l.GetName(), v)
				}
			}
		}
	}
}

// TestSweepBacklogWhenTheBackendFails shows the sweep's backlog: a live task
// due for observation that the sweep could not observe, because every poll
// of its backend fails.
func TestSweepBacklogWhenTheBackendFails(t *testing.T) {
	var failing failPolls
	clk := &clock{now: time.Now()}
	h := newHarness(t, harnessOptions{now: clk.Now, sweep: time.Hour, adapters: func(set map[string]adapters.Adapter) map[string]adapters.Adapter {
		failing.Adapter = set["jobs"]
		return map[string]adapters.Adapter{"jobs": &failing}
	}})
	task := h.createTask("long_job", nil)
	h.waitFor(task.TaskID, "submitted", func(tk *taskclient.Task) bool {
		return strings.Contains(tk.StatusMessage, "job-") || strings.Contains(tk.StatusMessage, "running")
	})
	failing.on.Store(true)
	clk.Advance(2 * time.Minute) // past SweepObserveAge: the task is due
	h.bridge.Sweep()
	s := scrapeMetrics(t, h)
	s.want(t, 1, "jobbridge_sweep_due_tasks")
	s.want(t, 1, "jobbridge_sweep_backlog_tasks")
	s.wantPositive(t, "jobbridge_backend_requests_total", "backend=jobs", "operation=poll", "outcome=error")
	s.want(t, 1, "jobbridge_tasks_live", "tool=long_job", "state=working")
}

// failPolls is an adapter whose polls fail once on is set.
type failPolls struct {
	adapters.Adapter
	on atomic.Bool
}

func (f *failPolls) Poll(ctx context.Context, refs []adapters.JobRef) ([]adapters.Observation, error) {
	if f.on.Load() {
		return nil, errors.New("backend unreachable")
	}
	return f.Adapter.Poll(ctx, refs)
}

// TestMonitoringExamplesNameRealMetrics checks that every jobbridge metric
// the dashboard and the alerting rules of examples/monitoring use is one
// the bridge serves, and that docs/operating.md documents it.
func TestMonitoringExamplesNameRealMetrics(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.waitTerminal(h.createTask("slow_compute", map[string]any{"seconds": 0.05, "label": "x"}).TaskID)
	s := scrapeMetrics(t, h)
	readme, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`jobbridge_[a-z_]+`)
	for _, file := range []string{"../examples/monitoring/dashboard.json", "../examples/monitoring/alerts.yaml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(file, ".json") {
			var v map[string]any
			if err := json.Unmarshal(data, &v); err != nil {
				t.Errorf("%s: %v", file, err)
			}
		} else {
			var v struct {
				Groups []struct {
					Rules []struct{ Alert, Expr string }
				}
			}
			if err := yaml.Unmarshal(data, &v); err != nil || len(v.Groups) == 0 {
				t.Errorf("%s: %v (%d groups)", file, err, len(v.Groups))
			}
		}
		for _, n := range slices.Compact(slices.Sorted(slices.Values(name.FindAllString(string(data), -1)))) {
			family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")
			if !documented(readme, family) {
				t.Errorf("%s uses %s, which docs/operating.md does not document", file, n)
			}
			if s[family] == nil {
				t.Errorf("%s uses %s, which the bridge does not serve", file, n)
			}
		}
	}
	// Every jobbridge family served is documented.
	for family := range s {
		if strings.HasPrefix(family, "jobbridge_") && !documented(readme, family) {
			t.Errorf("docs/operating.md does not document %s", family)
		}
	}
}

// documented reports whether the metrics table of docs/operating.md has a row for
// the metric family.
func documented(readme []byte, family string) bool {
	return bytes.Contains(readme, []byte("| `"+family+"` |"))
}
