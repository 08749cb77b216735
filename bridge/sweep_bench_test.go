package bridge_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
)

// BenchmarkSweepCover measures how fast the background sweep observes live
// tasks nobody polls: N tasks never observed, on a real SQLite file, behind
// an in-memory adapter that answers 100 jobs per Poll (as Batch's
// DescribeJobs does). One op is one sweep over all of them; the first op
// covers unpolled tasks, later ones tasks whose observations have aged.
//
//	go test -run '^$' -bench SweepCover -benchtime 1x ./bridge/
//
// It reports observations per second, the seconds one sweep took to cover
// every task (to hold against the 10s default sweep interval), and the Poll
// calls it made.
func BenchmarkSweepCover(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("tasks=%dk", n/1000), func(b *testing.B) {
			var counter *countingAdapter
			f := newSweepFixture(b, func(mem *memBackend) adapters.Adapter {
				counter = newCountingAdapter(mem)
				return batchedAdapter{counter, 100}
			})
			seedStart := time.Now()
			f.seed(n)
			b.Logf("seeded %d tasks in %s", n, time.Since(seedStart).Round(time.Millisecond))
			var took time.Duration
			var polls int
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i > 0 {
					f.clk.Advance(time.Minute) // every observation is due again
				}
				since := f.clk.Now()
				before, _ := counter.calls()
				start := time.Now()
				f.bridge.Sweep()
				took += time.Since(start)
				after, _ := counter.calls()
				polls += after - before
				b.StopTimer()
				if got, live := f.observed(since); got != n || live != n {
					b.Fatalf("one sweep observed %d of %d live tasks, want all %d", got, live, n)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(n*b.N)/took.Seconds(), "obs/s")
			b.ReportMetric(took.Seconds()/float64(b.N), "s/cover")
			b.ReportMetric(float64(polls)/float64(b.N), "polls/cover")
		})
	}
}
