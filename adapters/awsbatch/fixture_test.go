package awsbatch

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/fakes/batchfake"
)

// t0 is when every manual clock starts.
var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// clock is a manually advanced clock, optionally running on from real time.
type clock struct {
	mu     sync.Mutex
	base   time.Time // zero: real time
	offset time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.base.IsZero() {
		return time.Now().Add(c.offset)
	}
	return c.base.Add(c.offset)
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// staticCredentials are what the tests sign with; the fake checks only that
// a SigV4 signature is present.
var staticCredentials = credentials.NewStaticCredentialsProvider("AKIDJOBBRIDGETEST", "not-a-secret", "")

// noBackoff makes the SDK retry at once, so tests never sleep.
type noBackoff struct{}

func (noBackoff) BackoffDelay(int, error) (time.Duration, error) { return 0, nil }

// testClient returns the real SDK client talking to the fake at url, with
// three attempts for calls that keep the SDK's retries and no waiting
// between them.
func testClient(url string) *batch.Client {
	return batch.New(batch.Options{
		Region:       "eu-west-1",
		BaseEndpoint: aws.String(url),
		Credentials:  staticCredentials,
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 3
			o.Backoff = noBackoff{}
			o.RateLimiter = ratelimit.None
		}),
	})
}

// fixture is a Batch fake behind a loopback HTTP server and an adapter
// talking to it through the real SDK client; the fake and the adapter share
// a clock.
type fixture struct {
	t      *testing.T
	clock  *clock
	fake   *batchfake.Server
	url    string
	client *batch.Client
	// ops counts the DescribeJobs calls the adapter makes (one per call,
	// whatever the transport does underneath).
	ops *countingAPI
	a   *Adapter
}

// countingAPI counts the adapter's DescribeJobs calls on the way to the
// real client.
type countingAPI struct {
	*batch.Client
	describes atomic.Int64
}

func (c *countingAPI) DescribeJobs(ctx context.Context, in *batch.DescribeJobsInput, optFns ...func(*batch.Options)) (*batch.DescribeJobsOutput, error) {
	c.describes.Add(1)
	return c.Client.DescribeJobs(ctx, in, optFns...)
}

// testTool is the job block of the tool "job": the fake runs the script in
// argument "script".
func testTool() JobConfig {
	return JobConfig{
		JobQueue:      "default",
		JobDefinition: "sleeper",
		JobName:       "{args.name}",
		Parameters:    map[string]string{"jobbridge_script": "{args.script}"},
	}
}

// newFixture starts a fake and an adapter. A nil clock runs in real time.
func newFixture(t *testing.T, c *clock, backend BackendConfig, fakeOpts *batchfake.Options) *fixture {
	t.Helper()
	if c == nil {
		c = &clock{}
	}
	if fakeOpts == nil {
		fakeOpts = &batchfake.Options{}
	}
	fakeOpts.Now = c.Now
	fakeOpts.Region = "eu-west-1"
	fake := batchfake.New(fakeOpts)
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	f := &fixture{t: t, clock: c, fake: fake, url: hs.URL, client: testClient(hs.URL)}
	f.ops = &countingAPI{Client: f.client}
	if backend.Region == "" {
		backend.Region = "eu-west-1"
	}
	if backend.DescribeRate == 0 {
		backend.DescribeRate = 100
	}
	if backend.SubmitRate == 0 {
		backend.SubmitRate = 50
	}
	f.a = f.adapter(backend, map[string]JobConfig{"job": testTool()})
	return f
}

func (f *fixture) adapter(backend BackendConfig, tools map[string]JobConfig) *Adapter {
	f.t.Helper()
	a, err := New("batch", backend, tools, &Options{Client: f.ops, Now: f.clock.Now})
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	return a
}

// job is a start request for the test tool running script.
func job(script string) adapters.StartRequest {
	return adapters.StartRequest{Tool: "job", CorrelationID: nextCorrelation(), Arguments: map[string]any{"name": "test", "script": script}}
}

var correlations atomic.Int64

// nextCorrelation returns a fresh correlation ID shaped like the bridge's.
func nextCorrelation() string { return fmt.Sprintf("jb-Test%06d", correlations.Add(1)) }

// start starts a job and fails the test on error.
func (f *fixture) start(req adapters.StartRequest) adapters.JobRef {
	f.t.Helper()
	ref, err := f.a.Start(f.t.Context(), req)
	if err != nil {
		f.t.Fatalf("Start: %v", err)
	}
	return ref
}

// poll polls refs and fails the test on a Poll error.
func (f *fixture) poll(refs ...adapters.JobRef) []adapters.Observation {
	f.t.Helper()
	obs, err := f.a.Poll(f.t.Context(), refs)
	if err != nil {
		f.t.Fatalf("Poll: %v", err)
	}
	return obs
}

// describeCalls is how many DescribeJobs calls the fake received.
// describeCalls is how many DescribeJobs calls the adapter has made. It
// counts calls, not HTTP requests: the poller retries a connection the SDK
// lost under an answer (aws-sdk-go-v2#2737) within one call.
func (f *fixture) describeCalls() int { return int(f.ops.describes.Load()) }
