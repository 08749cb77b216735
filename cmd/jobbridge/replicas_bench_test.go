package main

import (
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/internal/fakes/jobapi"
	"github.com/jobbridge/jobbridge/internal/pgtest"
	"github.com/jobbridge/jobbridge/taskclient"
)

// BenchmarkDeployments measures, in one run, task creation throughput and
// tasks/get latency for one replica on SQLite, one on PostgreSQL and three on
// PostgreSQL behind a round-robin proxy (real `jobbridge serve` processes,
// the REST job fake, 8 concurrent clients):
//
//	go test -run '^$' -bench Deployments -benchtime 1x ./cmd/jobbridge/
//
// All replicas share the machine's two cores, so three replicas measure the
// cost of coordination, not scale-out.
func BenchmarkDeployments(b *testing.B) {
	bin := buildBinary(b)
	fake := jobapi.New(nil)
	fakeURL, err := fake.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer fake.Close()
	catalogPath := writeReplicaCatalog(b, fakeURL)
	for _, d := range []struct {
		name     string
		replicas int
		store    func() string
	}{
		{"sqlite-1", 1, func() string { return "sqlite:" + filepath.Join(b.TempDir(), "tasks.db") }},
		{"postgres-1", 1, func() string { return pgtest.Shared(b).NewDatabase(b) }},
		{"postgres-3", 3, func() string { return pgtest.Shared(b).NewDatabase(b) }},
	} {
		b.Run(d.name, func(b *testing.B) {
			cl := &cluster{t: b, bin: bin, catalog: catalogPath, dsn: d.store()}
			for i := range d.replicas {
				cl.start(i)
			}
			defer cl.stopAll()
			proxy := httptest.NewServer(cl)
			defer proxy.Close()
			client := &taskclient.Client{URL: proxy.URL + "/mcp", Tasks: true}
			for b.Loop() {
				creates, gets := loadRun(b, client, 8, 400)
				b.ReportMetric(creates, "creates/s")
				b.ReportMetric(float64(percentile(gets, 50).Microseconds()), "get-p50-µs")
				b.ReportMetric(float64(percentile(gets, 99).Microseconds()), "get-p99-µs")
			}
		})
	}
}

// loadRun creates n tasks from c concurrent clients, then polls each once
// (long jobs, so every poll finds a working task), and returns the creation
// rate and the tasks/get latencies.
func loadRun(b *testing.B, client *taskclient.Client, c, n int) (float64, []time.Duration) {
	ctx := b.Context()
	ids := make([]string, n)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range c {
		wg.Go(func() {
			for i := w; i < n; i += c {
				res, err := client.CallTool(ctx, "slow_compute", map[string]any{"seconds": 600, "label": fmt.Sprint(i)}, nil)
				if err != nil || res.Task == nil {
					b.Errorf("tools/call: %v %+v", err, res)
					return
				}
				ids[i] = res.Task.TaskID
			}
		})
	}
	wg.Wait()
	creates := float64(n) / time.Since(start).Seconds()
	lat := make([]time.Duration, n)
	for w := range c {
		wg.Go(func() {
			for i := w; i < n; i += c {
				t0 := time.Now()
				if _, err := client.GetTask(ctx, ids[i]); err != nil {
					b.Errorf("tasks/get: %v", err)
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	// Leave nothing running on the fake for the next deployment.
	for _, id := range ids {
		client.CancelTask(ctx, id)
	}
	return creates, lat
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[(len(s)-1)*p/100]
}
