package rest

import (
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"

	"github.com/jobbridge/jobbridge/adapters"
)

func TestBackoffIsJitteredAndBounded(t *testing.T) {
	a := &Adapter{retryWaitMin: 10 * time.Millisecond, retryWaitMax: 80 * time.Millisecond}
	tests := []struct {
		attempt int
		ceiling time.Duration
	}{
		{0, 10 * time.Millisecond},
		{1, 20 * time.Millisecond},
		{2, 40 * time.Millisecond},
		{3, 80 * time.Millisecond},
		{4, 80 * time.Millisecond},
		{40, 80 * time.Millisecond},
	}
	for _, tt := range tests {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := a.backoff(tt.attempt)
			if d < tt.ceiling/2 || d > tt.ceiling {
				t.Errorf("backoff(%d) = %v, want between %v and %v", tt.attempt, d, tt.ceiling/2, tt.ceiling)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("backoff(%d) always waits %v: no jitter", tt.attempt, seen)
		}
	}
}

// TestRetriesGiveUpTogether checks that once one status request of a Poll
// has used its retries in vain, the others are not repeated.
func TestRetriesGiveUpTogether(t *testing.T) {
	backend := testBackend()
	backend.MaxRetries = new(3)
	f := newFixture(t, backend, testJob())
	f.mock.RegisterNoResponder(f.record(jsonResponder(500, `{}`)))
	var giveUp atomic.Bool
	var counts []int
	for _, id := range []string{"a", "b", "c"} {
		before := len(f.requests())
		o, err := f.a.poll(t.Context(), testRef(id), f.a.retries, &giveUp)
		if err != nil || o.Err == nil {
			t.Fatalf("poll(%s) = %+v, %v; want an observation error", id, o, err)
		}
		counts = append(counts, len(f.requests())-before)
	}
	if want := []int{4, 1, 1}; !slices.Equal(counts, want) {
		t.Errorf("requests per job = %v, want %v", counts, want)
	}
}

// BenchmarkPollStorm reports the requests one Poll of 20 jobs sends while
// every answer is a 500 (max_retries 3): at most 80, usually far fewer.
func BenchmarkPollStorm(b *testing.B) {
	backend := testBackend()
	backend.MaxRetries = new(3)
	mock := httpmock.NewMockTransport()
	var calls atomic.Int64
	mock.RegisterNoResponder(func(*http.Request) (*http.Response, error) {
		calls.Add(1)
		return httpmock.NewStringResponse(500, `{}`), nil
	})
	a, err := New("jobs", backend, map[string]JobConfig{"deploy": testJob()}, &Options{
		HTTPClient:   &http.Client{Transport: mock},
		Getenv:       testEnv,
		RetryWaitMin: time.Microsecond,
		RetryWaitMax: 10 * time.Microsecond,
	})
	if err != nil {
		b.Fatal(err)
	}
	var refs []adapters.JobRef
	for i := range 20 {
		refs = append(refs, testRef("job-"+string(rune('a'+i))))
	}
	for b.Loop() {
		if _, err := a.Poll(b.Context(), refs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(calls.Load())/float64(b.N), "requests/poll")
}
