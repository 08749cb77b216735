package awsbatch

import (
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/fakes/batchfake"
)

// BenchmarkPollers models a bridge serving 1,000 live Batch tasks to 100
// clients, each polling its 10 tasks every poll interval. As the bridge does,
// a tasks/get reaches the adapter (Poll of one job) only when the task's last
// observation is older than the refresh interval; the intervals are short
// (100ms instead of seconds) so that a run takes seconds, which keeps their
// ratios. One op is one tasks/get. It reports the DescribeJobs calls the fake
// received per adapter Poll (describejobs/poll; a naive adapter makes 1) and
// per client tasks/get.
//
//	go test -run '^$' -bench BenchmarkPollers -benchtime 20000x ./adapters/awsbatch/
func BenchmarkPollers(b *testing.B) {
	const (
		clients        = 100
		tasksPerClient = 10
		interval       = 100 * time.Millisecond // pollIntervalMs, refresh_interval and describe_interval
	)
	fake := batchfake.New(nil)
	hs := httptest.NewServer(fake)
	b.Cleanup(hs.Close)
	client := testClient(hs.URL)

	refs := make([]adapters.JobRef, clients*tasksPerClient)
	for i := range refs {
		out, err := client.SubmitJob(b.Context(), &batch.SubmitJobInput{
			JobName: aws.String("bench"), JobQueue: aws.String("default"), JobDefinition: aws.String("sleeper"),
			Parameters: map[string]string{"jobbridge_script": "submitted=0s,runnable=0s,starting=0s,running=24h"},
		})
		if err != nil {
			b.Fatalf("SubmitJob: %v", err)
		}
		refs[i] = adapters.JobRef{ID: aws.ToString(out.JobId)}
	}
	a, err := New("batch", BackendConfig{Region: "eu-west-1", DescribeInterval: interval, DescribeRate: maxDescribeRate},
		map[string]JobConfig{"job": testTool()}, &Options{Client: client})
	if err != nil {
		b.Fatalf("New: %v", err)
	}

	var gets, polls, failures atomic.Int64
	before := fake.Calls(batchfake.OpDescribeJobs)
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := range clients {
		mine := refs[c*tasksPerClient : (c+1)*tasksPerClient]
		wg.Go(func() {
			observed := make([]time.Time, len(mine))
			for {
				for i, ref := range mine {
					if gets.Add(1) > int64(b.N) {
						return
					}
					if time.Since(observed[i]) < interval {
						continue // the bridge serves the stored observation
					}
					polls.Add(1)
					obs, err := a.Poll(b.Context(), []adapters.JobRef{ref})
					if err != nil || obs[0].Err != nil || obs[0].State != adapters.StateWorking {
						if failures.Add(1) == 1 {
							b.Logf("first failed poll: %+v, %v", obs, err)
						}
					}
					observed[i] = time.Now()
				}
				time.Sleep(interval)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if n := failures.Load(); n > 0 {
		b.Fatalf("%d polls failed", n)
	}
	calls := float64(fake.Calls(batchfake.OpDescribeJobs) - before)
	b.ReportMetric(calls/float64(polls.Load()), "describejobs/poll")
	b.ReportMetric(calls/float64(b.N), "describejobs/tasks_get")
	b.ReportMetric(float64(polls.Load())/float64(b.N), "polls/tasks_get")
}
