package awsbatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"golang.org/x/time/rate"

	"github.com/jobbridge/jobbridge/adapters"
)

// Poller limits.
const (
	// maxDescribe is the most job IDs one DescribeJobs call takes.
	maxDescribe = 100
	// backoffMin and backoffMax bound the pause after a failed DescribeJobs
	// (throttling, 5xx, a network error); it doubles with each failure in a
	// row, with jitter.
	backoffMin = time.Second
	backoffMax = 30 * time.Second
	// minIdle is the least time a job stays known to the poller after it
	// was last asked about: known jobs fill up DescribeJobs calls that are
	// made anyway.
	minIdle = 5 * time.Minute
)

// Pollers lets adapters share DescribeJobs pollers: adapters built with the
// same Pollers whose backends name the same endpoint, region, profile and
// role (one account and region) use one poller, one DescribeJobs limiter and
// one cache. The first adapter's describe_rate, describe_interval, timeout
// and queue_position apply. An adapter given its own client (Options.Client)
// always gets its own poller.
type Pollers struct {
	mu sync.Mutex
	m  map[pollerKey]*poller
}

// NewPollers returns an empty set of pollers.
func NewPollers() *Pollers { return &Pollers{m: map[pollerKey]*poller{}} }

type pollerKey struct {
	endpoint, region, profile, role string
}

func keyOf(b BackendConfig) pollerKey {
	return pollerKey{endpoint: b.Endpoint, region: b.Region, profile: b.Profile, role: b.AssumeRoleARN}
}

func (ps *Pollers) get(k pollerKey, create func() *poller) *poller {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.m == nil {
		ps.m = map[pollerKey]*poller{}
	}
	p, ok := ps.m[k]
	if !ok {
		p = create()
		ps.m[k] = p
	}
	return p
}

// poller answers "describe these jobs" from a cache of job descriptions,
// refreshing the jobs that are due in DescribeJobs calls of up to 100 IDs.
//
// A job asked about within interval of its last description is answered
// from the cache. The others are marked wanted; one background round at a
// time describes the wanted jobs, 100 per call, and fills each call's spare
// room with the known live jobs whose descriptions are oldest (at least half
// an interval old), which costs no extra call and makes their next poll a
// cache hit. Every caller waiting for a job is woken by the call that
// described it, so concurrent polls share answers.
type poller struct {
	api      BatchAPI
	retryer  aws.Retryer
	limiter  *rate.Limiter
	interval time.Duration
	idle     time.Duration
	timeout  time.Duration
	queuePos bool
	now      func() time.Time
	log      *slog.Logger

	mu           sync.Mutex
	jobs         map[string]*entry
	queues       map[string]*queueSnapshot // by queue ARN
	running      bool
	changed      chan struct{} // closed and replaced whenever entries change
	backoffUntil time.Time
	retryUntil   time.Time // the end of the pause a throttling answer asked for
	failures     int
	lastErr      error
}

// entry is the poller's knowledge of one job.
type entry struct {
	detail *types.JobDetail // the last description; nil when DescribeJobs left the job out
	at     time.Time        // when it was described; zero until then
	err    error            // why the last attempt to describe it failed; nil after a success
	gen    uint64           // counts the attempts to describe it
	wanted bool             // a caller waits for a fresh description
	asked  time.Time        // when a caller last asked about it
}

func (e *entry) fresh(now time.Time, interval time.Duration) bool {
	return !e.at.IsZero() && e.err == nil && now.Sub(e.at) < interval
}

func (e *entry) finished() bool {
	return e.detail != nil && (e.detail.Status == types.JobStatusSucceeded || e.detail.Status == types.JobStatusFailed)
}

// queueSnapshot is the front of one job queue.
type queueSnapshot struct {
	at        time.Time
	positions map[string]int // job ARN -> 1-based position
}

// description is what the poller knows of one job for one caller.
type description struct {
	detail   *types.JobDetail // nil when DescribeJobs left the job out
	err      error
	position int // 1-based queue position while RUNNABLE; 0 when unknown
}

func newPoller(api BatchAPI, b BackendConfig, now func() time.Time, log *slog.Logger) *poller {
	return &poller{
		api:      api,
		retryer:  connectionRetryer(),
		limiter:  rate.NewLimiter(rate.Limit(b.DescribeRate), burst(b.DescribeRate)),
		interval: b.DescribeInterval,
		idle:     max(minIdle, 10*b.DescribeInterval),
		timeout:  b.Timeout,
		queuePos: b.QueuePosition,
		now:      now,
		log:      log,
		jobs:     map[string]*entry{},
		queues:   map[string]*queueSnapshot{},
		changed:  make(chan struct{}),
	}
}

// describe returns what is known of each job: from the cache when fresh,
// otherwise after a DescribeJobs call that included it. While the poller
// backs off after a failure, stale jobs are answered with an error at once.
// describe fails only when ctx ends while it waits.
func (p *poller) describe(ctx context.Context, ids []string) ([]description, error) {
	type waiter struct {
		i   int
		e   *entry
		gen uint64
	}
	out := make([]description, len(ids))
	var waits []waiter

	p.mu.Lock()
	now := p.now()
	for i, id := range ids {
		if id == "" {
			out[i] = description{err: errors.New("the job reference has no AWS Batch job ID")}
			continue
		}
		e := p.jobs[id]
		if e == nil {
			e = &entry{}
			p.jobs[id] = e
		}
		e.asked = now
		switch {
		case e.fresh(now, p.interval):
			out[i] = p.result(e)
		case now.Before(p.backoffUntil):
			out[i] = description{err: p.backoffError(now)}
		default:
			e.wanted = true
			waits = append(waits, waiter{i: i, e: e, gen: e.gen})
		}
	}
	if len(waits) > 0 && !p.running {
		p.running = true
		// The round serves every caller waiting for it, so it must not end
		// with the caller that started it.
		go p.run(context.WithoutCancel(ctx))
	}
	for {
		pending := waits[:0]
		for _, w := range waits {
			if w.e.gen > w.gen {
				out[w.i] = p.result(w.e)
			} else {
				pending = append(pending, w)
			}
		}
		waits = pending
		if len(waits) == 0 {
			break
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for DescribeJobs: %w", ctx.Err())
		}
		p.mu.Lock()
	}
	p.mu.Unlock()
	return out, nil
}

// result is what a caller is told about e. It runs with p.mu held.
func (p *poller) result(e *entry) description {
	d := description{detail: e.detail, err: e.err}
	if p.queuePos && e.detail != nil && e.detail.Status == types.JobStatusRunnable {
		if q := p.queues[aws.ToString(e.detail.JobQueue)]; q != nil {
			d.position = q.positions[aws.ToString(e.detail.JobArn)]
		}
	}
	return d
}

// backoffError is the answer while the poller backs off: after throttling,
// an adapters.ThrottledError with what is left of the pause Batch asked
// for. It runs with p.mu held.
func (p *poller) backoffError(now time.Time) error {
	ce := problem("DescribeJobs", nil, p.lastErr)
	ce.Message += fmt.Sprintf(" (not asked again for %v)", p.backoffUntil.Sub(now).Round(time.Millisecond))
	var err error = ce
	if isThrottle(p.lastErr) {
		return &adapters.ThrottledError{RetryAfter: max(p.retryUntil.Sub(now), 0), Err: err}
	}
	return err
}

// known returns the last description of the job, however old, or nil.
// A finished job's description does not go stale: Batch's SUCCEEDED and
// FAILED are final.
func (p *poller) known(id string) *types.JobDetail {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.jobs[id]; e != nil {
		return e.detail
	}
	return nil
}

// invalidate makes the next poll of the job describe it afresh.
func (p *poller) invalidate(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.jobs[id]; e != nil {
		e.at = time.Time{}
	}
}

// run describes wanted jobs until none is left.
func (p *poller) run(ctx context.Context) {
	for {
		p.mu.Lock()
		now := p.now()
		p.forget(now)
		if now.Before(p.backoffUntil) {
			p.failWanted(p.backoffError(now))
			p.running = false
			p.mu.Unlock()
			return
		}
		ids := p.pick(now)
		if len(ids) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()

		out, err := p.call(ctx, ids)

		p.mu.Lock()
		now = p.now()
		if err != nil {
			p.failures++
			d := min(backoffMin<<min(p.failures-1, 10), backoffMax)
			d = d*3/4 + rand.N(d/2+1) // ±25%
			p.backoffUntil, p.lastErr = now.Add(d), err
			kind := "failed"
			var callErr error = problem("DescribeJobs", nil, err)
			if isThrottle(err) {
				kind = "throttled"
				// Every waiting caller learns it is throttling, with the
				// pause Batch asked for, and none is asked before it ends.
				ra := retryAfterOf(err)
				p.retryUntil = now.Add(ra)
				if p.retryUntil.After(p.backoffUntil) {
					p.backoffUntil = p.retryUntil
				}
				callErr = &adapters.ThrottledError{RetryAfter: ra, Err: callErr}
			}
			p.log.Warn("DescribeJobs "+kind+"; backing off", "jobs", len(ids), "backoff", p.backoffUntil.Sub(now).Round(time.Millisecond), "error", err)
			for _, id := range ids {
				e := p.jobs[id]
				e.err = callErr
				e.gen++
				e.wanted = false
			}
		} else {
			p.failures = 0
			got := make(map[string]*types.JobDetail, len(out.Jobs))
			for i := range out.Jobs {
				d := &out.Jobs[i]
				got[aws.ToString(d.JobId)] = d
			}
			for _, id := range ids {
				e := p.jobs[id]
				e.detail, e.at, e.err = got[id], now, nil
				e.gen++
				e.wanted = false
			}
		}
		p.broadcast()
		snapshot := err == nil && p.queuePos
		p.mu.Unlock()

		if snapshot {
			p.snapshotQueues(ctx, out.Jobs)
		}
	}
}

// call makes one DescribeJobs call, without the SDK's retries: the poller
// backs off itself and callers are answered at once meanwhile.
func (p *poller) call(ctx context.Context, ids []string) (*batch.DescribeJobsOutput, error) {
	if err := p.limiter.Wait(ctx); err != nil {
		return nil, fmt.Errorf("waiting for the DescribeJobs rate limit: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	return p.api.DescribeJobs(cctx, &batch.DescribeJobsInput{Jobs: ids}, p.options)
}

// options are the per-call options of the poller's calls: no SDK retries
// but up to three quick retries of a connection error. The poller backs off from
// throttling and server errors itself, and answers waiting callers
// meanwhile; a connection error is retried because the SDK can lose a
// connection under a successful answer (aws/aws-sdk-go-v2#2737).
func (p *poller) options(o *batch.Options) { o.Retryer = p.retryer }

// connectionRetryer retries connection errors only, up to three times with
// a short, growing pause: a DescribeJobs is a read, safe to repeat, and the
// pause lets the transport drop the connection it lost before the next
// attempt picks one.
func connectionRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = 4
		o.Retryables = []retry.IsErrorRetryable{retry.RetryableConnectionError{}}
		o.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
			return time.Duration(attempt) * 20 * time.Millisecond, nil
		})
		o.RateLimiter = ratelimit.None
	})
}

// pick chooses the IDs of the next DescribeJobs call: wanted jobs first,
// then known live jobs at least half an interval old, oldest first, up to
// 100. It runs with p.mu held.
func (p *poller) pick(now time.Time) []string {
	var ids []string
	var fill []string
	for id, e := range p.jobs {
		switch {
		case e.wanted:
			if len(ids) < maxDescribe {
				ids = append(ids, id)
			}
		case !e.finished() && (e.at.IsZero() || now.Sub(e.at) >= p.interval/2):
			fill = append(fill, id)
		}
	}
	if room := maxDescribe - len(ids); len(ids) > 0 && room > 0 && len(fill) > 0 {
		slices.SortFunc(fill, func(a, b string) int { return p.jobs[a].at.Compare(p.jobs[b].at) })
		ids = append(ids, fill[:min(room, len(fill))]...)
	}
	slices.Sort(ids)
	return ids
}

// failWanted answers every waiting caller with err. It runs with p.mu held.
func (p *poller) failWanted(err error) {
	for _, e := range p.jobs {
		if e.wanted {
			e.err = err
			e.gen++
			e.wanted = false
		}
	}
	p.broadcast()
}

// forget drops jobs nobody asked about for p.idle. It runs with p.mu held.
func (p *poller) forget(now time.Time) {
	for id, e := range p.jobs {
		if !e.wanted && now.Sub(e.asked) > p.idle {
			delete(p.jobs, id)
		}
	}
}

func (p *poller) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// snapshotQueues refreshes the queue snapshots of the RUNNABLE jobs just
// described, at most once per queue and interval. Failures only leave
// positions unknown; a denied permission turns the feature off.
func (p *poller) snapshotQueues(ctx context.Context, jobs []types.JobDetail) {
	var due []string
	p.mu.Lock()
	now := p.now()
	for _, d := range jobs {
		q := aws.ToString(d.JobQueue)
		if d.Status != types.JobStatusRunnable || q == "" || slices.Contains(due, q) {
			continue
		}
		if s := p.queues[q]; s == nil || now.Sub(s.at) >= p.interval {
			due = append(due, q)
		}
	}
	p.mu.Unlock()
	for _, q := range due {
		if err := p.limiter.Wait(ctx); err != nil {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, p.timeout)
		out, err := p.api.GetJobQueueSnapshot(cctx, &batch.GetJobQueueSnapshotInput{JobQueue: aws.String(q)}, p.options)
		cancel()
		p.mu.Lock()
		switch {
		case err == nil:
			s := &queueSnapshot{at: p.now(), positions: map[string]int{}}
			if out.FrontOfQueue != nil {
				for i, j := range out.FrontOfQueue.Jobs {
					s.positions[aws.ToString(j.JobArn)] = i + 1
				}
			}
			p.queues[q] = s
		case apiCode(err) == "AccessDeniedException" || httpStatus(err) == 403:
			p.queuePos = false
			p.log.Warn("GetJobQueueSnapshot is not allowed; not reporting queue positions", "error", err)
		default:
			p.log.Debug("GetJobQueueSnapshot failed", "queue", q, "error", err)
		}
		p.mu.Unlock()
	}
}
