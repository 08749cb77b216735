package storetest

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/mapping"
)

// Parallelism returns the SetParallelism argument that makes RunParallel
// run c goroutines.
func Parallelism(c int) int { return max(1, c/runtime.GOMAXPROCS(0)) }

// ReportTasks reports n tasks in the benchmark's time as tasks/s.
func ReportTasks(b *testing.B, n int64) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchCreateParallel creates tasks from 32 goroutines through one store
// that open returns: "create" is Create alone, and "create+update" a
// Create followed by an Update of the same task (the bridge's two writes
// per task: the row, then the job reference). Each store's
// BenchmarkCreateParallel runs it; compare its tasks/s with the store's
// floor benchmarks on the same disk or server.
func BenchCreateParallel(b *testing.B, open func(testing.TB) mapping.Store) {
	for _, updates := range []bool{false, true} {
		name := "create"
		if updates {
			name = "create+update"
		}
		b.Run(name, func(b *testing.B) {
			s := open(b)
			now := time.Now().UTC().Truncate(time.Millisecond)
			var next, done atomic.Int64
			b.SetParallelism(Parallelism(32))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					t := newTask(fmt.Sprintf("task-%d", next.Add(1)), "alice")
					lifetime(t, now, now.Add(time.Hour))
					if err := s.Create(b.Context(), t, mapping.CreateLimits{MaxLive: 1 << 30}); err != nil {
						b.Error(err)
						return
					}
					if updates {
						t.JobRef = []byte(`{"id":"job-2"}`)
						if err := s.Update(b.Context(), t); err != nil {
							b.Error(err)
							return
						}
					}
					done.Add(1)
				}
			})
			ReportTasks(b, done.Load())
		})
	}
}
