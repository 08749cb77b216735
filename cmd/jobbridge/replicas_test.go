package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
	"github.com/jobbridge/jobbridge/internal/pgtest"
	"github.com/jobbridge/jobbridge/taskclient"
)

// TestReplicasSurviveKills runs three `jobbridge serve` processes on one
// PostgreSQL behind a round-robin proxy, creates tasks against the REST job
// fake, kills a replica with SIGKILL in the middle of the load and again in
// the middle of a wave of cancels, and checks that nothing is lost or done
// twice.
func TestReplicasSurviveKills(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	bin := buildBinary(t)

	fake := jobapi.New(nil)
	fakeURL, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	catalogPath := writeReplicaCatalog(t, fakeURL)

	cl := &cluster{t: t, bin: bin, catalog: catalogPath, dsn: dsn}
	for i := range 3 {
		cl.start(i)
	}
	defer cl.stopAll()
	proxy := httptest.NewServer(cl)
	defer proxy.Close()
	client := &taskclient.Client{URL: proxy.URL + "/mcp", Tasks: true, Elicitation: true}
	ctx := t.Context()

	var (
		mu    sync.Mutex
		tasks []string
	)
	create := func(args map[string]any) {
		res, err := retry(ctx, func() (*taskclient.CallResult, error) { return client.CallTool(ctx, "slow_compute", args, nil) })
		if err != nil {
			t.Errorf("tools/call: %v", err)
			return
		}
		if res.Task == nil {
			t.Errorf("tools/call: no task: %+v", res)
			return
		}
		mu.Lock()
		tasks = append(tasks, res.Task.TaskID)
		mu.Unlock()
	}

	// Wave 1: tasks created while a replica dies.
	var wg sync.WaitGroup
	for i := range 30 {
		if i == 12 {
			cl.kill(0)
		}
		wg.Go(func() { create(map[string]any{"seconds": 0.5 + float64(i%4)*0.5, "label": fmt.Sprint(i)}) })
		time.Sleep(15 * time.Millisecond)
	}
	wg.Wait()
	cl.start(0)

	// Wave 2: long tasks, cancelled while a replica dies.
	mu.Lock()
	firstWave := len(tasks)
	mu.Unlock()
	for i := range 15 {
		wg.Go(func() { create(map[string]any{"seconds": 120, "label": fmt.Sprint("long", i)}) })
	}
	wg.Wait()
	mu.Lock()
	long := append([]string(nil), tasks[firstWave:]...)
	mu.Unlock()
	// Let every long job be submitted before cancelling.
	for _, id := range long {
		waitFor(t, ctx, client, id, func(tk *taskclient.Task) bool {
			return tk.Status != "working" || strings.HasPrefix(tk.StatusMessage, "running")
		})
	}
	for i, id := range long {
		if i == 6 {
			cl.kill(1)
		}
		wg.Go(func() {
			if _, err := retry(ctx, func() (struct{}, error) { return struct{}{}, client.CancelTask(ctx, id) }); err != nil {
				t.Errorf("tasks/cancel: %v", err)
			}
		})
	}
	wg.Wait()
	cl.start(1)

	// Every task reaches a terminal state, and keeps it.
	first := map[string]string{}
	deadline := time.Now().Add(90 * time.Second)
	for {
		pending := 0
		for _, id := range tasks {
			tk, err := retry(ctx, func() (*taskclient.Task, error) { return client.GetTask(ctx, id) })
			if err != nil {
				t.Fatalf("task %s lost: %v", id[:6], err)
			}
			if !tk.Terminal() {
				pending++
				continue
			}
			state := tk.Status
			if tk.Result != nil {
				state += ":" + tk.Result.Text()
			}
			if prev, ok := first[id]; ok && prev != state {
				t.Errorf("task %s flipped from %q to %q", id[:6], prev, state)
			}
			first[id] = state
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tasks never finished", pending, len(tasks))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// One more pass: terminal states do not change.
	for _, id := range tasks {
		tk, err := retry(ctx, func() (*taskclient.Task, error) { return client.GetTask(ctx, id) })
		if err != nil {
			t.Fatalf("task %s lost after finishing: %v", id[:6], err)
		}
		state := tk.Status
		if tk.Result != nil {
			state += ":" + tk.Result.Text()
		}
		if first[id] != state {
			t.Errorf("task %s flipped from %q to %q", id[:6], first[id], state)
		}
	}

	// The backend saw one job per correlation ID and at most one cancel per job.
	jobs := listJobs(t, fakeURL)
	perCorrelation := map[string]int{}
	for _, j := range jobs {
		perCorrelation[j.CorrelationID]++
		if n := fake.Cancels(j.ID); n > 1 {
			t.Errorf("job %s received %d cancels", j.ID, n)
		}
	}
	for corr, n := range perCorrelation {
		if n > 1 {
			t.Errorf("correlation %s submitted %d times", corr, n)
		}
	}
	cancelled := 0
	for _, id := range long {
		if strings.HasPrefix(first[id], "cancelled") {
			cancelled++
		}
	}
	if cancelled != len(long) {
		t.Errorf("%d of %d cancelled long tasks ended cancelled", cancelled, len(long))
	}
	t.Logf("%d tasks, %d jobs, %d cancelled, 2 replicas killed", len(tasks), len(jobs), cancelled)
}

// cluster is a set of replicas behind a round-robin proxy.
type cluster struct {
	t        testing.TB
	bin      string
	catalog  string
	dsn      string
	env      []string // added to each replica's environment
	mu       sync.Mutex
	replicas [3]*replica
	next     atomic.Int64
}

type replica struct {
	cmd  *exec.Cmd
	addr string
	log  *bytes.Buffer
	done chan struct{}
}

func (c *cluster) start(i int) {
	t := c.t
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := &replica{addr: addr, log: &bytes.Buffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(c.bin, "serve", "--config", c.catalog, "--store", c.dsn, "--listen", addr,
		"--sweep-interval", "300ms", "--submit-timeout", "2s", "--log-level", "warn")
	r.cmd.Env = append(append(os.Environ(), "JOBBRIDGE_STATE_KEY="+strings.Repeat("ab", 32)), c.env...)
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-r.done:
			t.Fatalf("replica %d exited: %s", i, r.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %d never became ready: %s", i, r.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.mu.Lock()
	c.replicas[i] = r
	c.mu.Unlock()
}

func (c *cluster) kill(i int) {
	c.mu.Lock()
	r := c.replicas[i]
	c.replicas[i] = nil
	c.mu.Unlock()
	r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
}

func (c *cluster) stopAll() {
	for i := range c.replicas {
		c.mu.Lock()
		r := c.replicas[i]
		c.mu.Unlock()
		if r != nil {
			c.kill(i)
		}
	}
}

// ServeHTTP forwards each request to the next replica, round robin, as a
// plain load balancer with no affinity would. A dead replica's requests fail
// with 502, and clients retry.
func (c *cluster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	var live []*replica
	for _, rp := range c.replicas {
		if rp != nil {
			live = append(live, rp)
		}
	}
	c.mu.Unlock()
	if len(live) == 0 {
		http.Error(w, "no replica", http.StatusBadGateway)
		return
	}
	target := live[int(c.next.Add(1))%len(live)]
	u, _ := url.Parse("http://" + target.addr)
	httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
}

// retry repeats a call that failed in transport (a killed replica) or with
// a 502 from the proxy. JSON-RPC errors are returned at once.
func retry[T any](ctx context.Context, call func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range 100 {
		v, err = call()
		var rpc *taskclient.RPCError
		if err == nil || errors.As(err, &rpc) && rpc.HTTPStatus != http.StatusBadGateway {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(100 * time.Millisecond):
		}
	}
	return v, err
}

func waitFor(t *testing.T, ctx context.Context, c *taskclient.Client, id string, cond func(*taskclient.Task) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tk, err := retry(ctx, func() (*taskclient.Task, error) { return c.GetTask(ctx, id) })
		if err != nil {
			t.Fatal(err)
		}
		if cond(tk) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s stuck: %s %q", id[:6], tk.Status, tk.StatusMessage)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type fakeJob struct {
	ID            string `json:"id"`
	CorrelationID string `json:"correlation_id"`
	Status        string `json:"status"`
}

func listJobs(t *testing.T, base string) []fakeJob {
	resp, err := http.Get(base + "/jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Jobs []fakeJob `json:"jobs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Jobs
}

// buildBinary builds jobbridge once per test binary.
func buildBinary(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jobbridge")
	out, err := exec.Command("go", "build", "-o", path, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("building jobbridge: %v\n%s", err, out)
	}
	return path
}

// writeReplicaCatalog writes the conformance catalog with its backend
// pointed at the fake.
func writeReplicaCatalog(t testing.TB, fakeURL string) string {
	t.Helper()
	data, err := os.ReadFile("../../configs/conformance.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), "base_url: http://127.0.0.1:9/", "base_url: "+fakeURL, 1)
	if text == string(data) {
		t.Fatal("configs/conformance.yaml no longer has the expected base_url line")
	}
	path := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
