package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
	"github.com/jobbridge/jobbridge/internal/pgtest"
	"github.com/jobbridge/jobbridge/taskclient"
)

// pushCatalog is a REST backend whose job API posts signed callbacks
// (Standard Webhooks) to /events/jobs, with one long tool. Its refresh
// interval is an hour, so that nothing but the events moves the tasks.
const pushCatalog = `version: 1
limits: {creates_per_minute: 100000, max_live_tasks: 100000}
defaults:
  refresh_interval: 1h
  poll_interval: 10m
  ttl: 2h
backends:
  jobs:
    type: rest
    base_url: %s
    allow_networks: [127.0.0.0/8]
    events:
      secret: ${JOBS_CALLBACK_SECRET}
      job_id: id
tools:
  - name: long
    description: A long job.
    backend: jobs
    task: required
    input_schema: {type: object}
    job:
      start:
        path: /jobs
        body: {duration_seconds: 7200, output: done, correlation_id: "{correlation_id}"}
      job_id: {field: id}
      status:
        path: /jobs/{job.id}
        field: status
        states: {queued: working, running: working, succeeded: succeeded, failed: tool_error, cancelled: cancelled}
        message: message
`

// pushSecret is the benchmark's Standard Webhooks secret.
var pushSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("jobbridge push benchmark secret!"))

// BenchmarkPushLatency measures how long a job event takes from arriving
// at one replica to the notifications/tasks a client receives from a
// stream held by another: three real `jobbridge serve` processes on one
// PostgreSQL, 1,000 tasks (JOBBRIDGE_PUSH_TASKS) listened to on replica 3
// over 4 streams, each event a signed callback POSTed to replica 2 (one at
// a time, so that the figure is the latency, not a queue). The floor, in
// the same run and on the same database, is PostgreSQL's own
// NOTIFY-to-LISTEN latency between two connections.
//
//	go test -run '^$' -bench PushLatency -benchtime 1x ./cmd/jobbridge/
func BenchmarkPushLatency(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("JOBBRIDGE_PUSH_TASKS")); err == nil && v > 0 {
		n = v
	}
	bin := buildBinary(b)
	fake := jobapi.New(nil)
	fakeURL, err := fake.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer fake.Close()
	catalogPath := filepath.Join(b.TempDir(), "catalog.yaml")
	if err := os.WriteFile(catalogPath, fmt.Appendf(nil, pushCatalog, fakeURL), 0o600); err != nil {
		b.Fatal(err)
	}
	dsn := pgtest.Shared(b).NewDatabase(b)
	cl := &cluster{t: b, bin: bin, catalog: catalogPath, dsn: dsn, env: []string{"JOBS_CALLBACK_SECRET=" + pushSecret}}
	for i := range 3 {
		cl.start(i)
	}
	defer cl.stopAll()
	url := func(i int) string { return "http://" + cl.replicas[i].addr }
	creator := &taskclient.Client{URL: url(0) + "/mcp", Tasks: true}
	listener := &taskclient.Client{URL: url(2) + "/mcp", Tasks: true}
	ctx := b.Context()

	ids, jobs := createLongTasks(b, ctx, creator, fakeURL, n)
	const streams = 4
	arrived := make([]chan time.Time, n)
	for i := range arrived {
		arrived[i] = make(chan time.Time, 8)
	}
	index := map[string]int{}
	for i, id := range ids {
		index[id] = i
	}
	want := regexp.MustCompile(`^step (\d+)$`)
	var ready sync.WaitGroup
	for s := range streams {
		part := ids[s*n/streams : (s+1)*n/streams]
		st, err := listener.Listen(ctx, part)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		if len(st.TaskIDs) != len(part) {
			b.Fatalf("stream %d acknowledged %d of %d tasks", s, len(st.TaskIDs), len(part))
		}
		ready.Add(len(part))
		go func() {
			initial := map[string]bool{}
			for {
				t, err := st.Next()
				if err != nil {
					return
				}
				at := time.Now()
				if !initial[t.TaskID] {
					initial[t.TaskID] = true
					ready.Done()
					continue
				}
				if m := want.FindStringSubmatch(t.StatusMessage); m != nil {
					arrived[index[t.TaskID]] <- at
				}
			}
		}()
	}
	ready.Wait()

	floor := notifyFloor(b, ctx, dsn, n)
	for b.Loop() {
		lat := make([]time.Duration, 0, n)
		for i, job := range jobs {
			sent := time.Now()
			postCallback(b, url(1)+"/events/jobs", fmt.Sprintf("e-%d-%d", b.N, i), job, fmt.Sprintf("step %d", i))
			select {
			case at := <-arrived[i]:
				lat = append(lat, at.Sub(sent))
			case <-time.After(10 * time.Second):
				b.Fatalf("no notification for task %d within 10s", i)
			}
		}
		b.ReportMetric(float64(percentile(lat, 50).Microseconds()), "push-p50-µs")
		b.ReportMetric(float64(percentile(lat, 99).Microseconds()), "push-p99-µs")
		b.ReportMetric(float64(percentile(floor, 50).Microseconds()), "pg-notify-p50-µs")
		b.ReportMetric(float64(percentile(floor, 99).Microseconds()), "pg-notify-p99-µs")
	}
}

// createLongTasks creates n tasks one after another and returns their IDs
// and backend job IDs (each the job the fake created for it).
func createLongTasks(b *testing.B, ctx context.Context, c *taskclient.Client, fakeURL string, n int) (ids, jobs []string) {
	ids, jobs = make([]string, n), make([]string, n)
	for i := range n {
		res, err := c.CallTool(ctx, "long", map[string]any{}, nil)
		if err != nil || res.Task == nil {
			var text string
			if res != nil && res.Result != nil {
				text = res.Result.Text()
			}
			b.Fatalf("tools/call: %v %s", err, text)
		}
		ids[i] = res.Task.TaskID
		for deadline := time.Now().Add(10 * time.Second); ; {
			listed := fakeJobs(b, fakeURL)
			if len(listed) == i+1 {
				jobs[i] = listed[0].ID // newest first
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("the fake lists %d jobs after %d tasks", len(listed), i+1)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	return ids, jobs
}

// fakeJobs lists the REST job fake's jobs, newest first.
func fakeJobs(b testing.TB, base string) []fakeJob {
	resp, err := http.Get(base + "/jobs")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Jobs []fakeJob `json:"jobs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		b.Fatal(err)
	}
	return out.Jobs
}

// postCallback sends one signed Standard Webhooks callback saying the job
// runs at the given step.
func postCallback(b testing.TB, url, id, job, message string) {
	body := fmt.Appendf(nil, `{"id":%q,"status":"running","message":%q}`, job, message)
	status, answer := sendCallback(b, url, id, body, pushSecret)
	if status != http.StatusAccepted || !bytes.Contains(answer, []byte(`"applied"`)) {
		b.Fatalf("callback: HTTP %d %s", status, answer)
	}
}

// sendCallback POSTs body as a Standard Webhooks callback signed with
// secret, and returns the answer.
func sendCallback(b testing.TB, url, id string, body []byte, secret string) (int, []byte) {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	key, _ := base64.StdEncoding.DecodeString(secret[len("whsec_"):])
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	out.ReadFrom(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, out.Bytes()
}

// notifyFloor measures n NOTIFY-to-LISTEN round trips between two plain
// connections to the database: the fan-out's floor.
func notifyFloor(b *testing.B, ctx context.Context, dsn string, n int) []time.Duration {
	listen, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer listen.Close(ctx)
	notify, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer notify.Close(ctx)
	if _, err := listen.Exec(ctx, "LISTEN bench_floor"); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, n)
	for i := range n {
		sent := time.Now()
		if _, err := notify.Exec(ctx, "SELECT pg_notify('bench_floor', $1)", strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
		if _, err := listen.WaitForNotification(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(sent))
	}
	slices.Sort(lat)
	return lat
}
