package githubactions

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Errors of requests the adapter did not send.
var (
	// ErrRateLimited is wrapped by errors and observation errors caused by
	// GitHub's rate limits (primary or secondary) or by the backend's own
	// request budget. It never ends a task: the bridge keeps serving the
	// last observation and asks again later.
	ErrRateLimited = errors.New("GitHub rate limit or request budget reached")

	errNotSent = errors.New("request not sent")
)

// Idle connections the default transport keeps, so that the runs a Poll
// observes concurrently (pollConcurrency), and the Polls the bridge runs at
// once (tasks/get, and its sweep's batches), reuse connections to the API
// host instead of opening one per request.
const (
	idleConnsPerHost = 64
	idleConns        = 256
)

// keepIdle raises t's idle-connection limits to idleConnsPerHost per host
// (the default is 2) and idleConns in all (zero, no limit, stays).
func keepIdle(t *http.Transport) {
	t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, idleConnsPerHost)
	if t.MaxIdleConns != 0 {
		t.MaxIdleConns = max(t.MaxIdleConns, idleConns)
	}
}

// fromCacheHeader marks a response the ETag cache answered (after a 304).
// go-github does not update its rate-limit state from such responses.
const fromCacheHeader = "X-From-Cache"

// defaultThrottle is how long the adapter backs off after a rate-limit
// answer that says nothing about how long to wait.
const defaultThrottle = time.Minute

// maxCachedBody bounds the answers the ETag cache keeps.
const maxCachedBody = 1 << 20

// throttledError is returned, without a request, while a rate limit is in
// force.
type throttledError struct{ until time.Time }

func (e *throttledError) Error() string {
	return fmt.Sprintf("rate limited until %s: %v", e.until.UTC().Format(time.RFC3339), errNotSent)
}
func (e *throttledError) Unwrap() []error { return []error{ErrRateLimited, errNotSent} }

// budgetError is returned, without a request, when the hourly request budget
// is spent.
type budgetError struct{ perHour int }

func (e *budgetError) Error() string {
	return fmt.Sprintf("request budget of %d an hour spent: %v", e.perHour, errNotSent)
}
func (e *budgetError) Unwrap() []error { return []error{ErrRateLimited, errNotSent} }

// meter is the transport under go-github: it pins the API version, keeps the
// hourly request budget, and holds every request back while GitHub has asked
// us to wait. It uses the adapter's clock throughout.
type meter struct {
	base    http.RoundTripper
	now     func() time.Time
	version string
	perHour int
	budget  *rate.Limiter

	mu    sync.Mutex
	until time.Time
}

func newMeter(base http.RoundTripper, now func() time.Time, version string, perHour int) *meter {
	burst := max(perHour/12, 10) // five minutes' worth
	lim := rate.NewLimiter(rate.Limit(float64(perHour)/3600), burst)
	lim.SetBurstAt(now(), burst) // start full on the adapter's clock
	return &meter{base: base, now: now, version: version, perHour: perHour, budget: lim}
}

// RoundTrip implements http.RoundTripper. A GET is charged unless answered
// 304 (conditional requests that GitHub answers 304 do not count against its
// primary rate limit); a plain GET needs one request of budget left, a
// conditional one goes out even when the budget is spent, as it is most
// likely free. Other methods (dispatch, cancel, review) are user actions:
// they are always sent and charged, and may run the budget into debt that
// later polls pay back.
func (m *meter) RoundTrip(req *http.Request) (*http.Response, error) {
	now := m.now()
	if until := m.throttledUntil(); now.Before(until) {
		return nil, &throttledError{until: until}
	}
	get := req.Method == http.MethodGet || req.Method == http.MethodHead
	if get && req.Header.Get("If-None-Match") == "" && m.budget.TokensAt(now) < 1 {
		return nil, &budgetError{perHour: m.perHour}
	}
	if !get {
		m.budget.ReserveN(now, 1)
	}
	out := req.Clone(req.Context())
	out.Header.Set("X-GitHub-Api-Version", m.version)
	resp, err := m.base.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	if get && resp.StatusCode != http.StatusNotModified {
		m.budget.ReserveN(m.now(), 1)
	}
	m.observe(resp)
	return resp, nil
}

// observe reads the rate-limit signals of an answer: x-ratelimit-remaining 0
// (wait until x-ratelimit-reset), retry-after on 403 and 429, and a bare 429
// (wait a minute).
func (m *meter) observe(resp *http.Response) {
	now := m.now()
	h := resp.Header
	code := resp.StatusCode
	if h.Get("X-RateLimit-Remaining") == "0" {
		until := now.Add(defaultThrottle)
		if reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil && time.Unix(reset, 0).After(now) {
			until = time.Unix(reset, 0)
		}
		m.block(until)
	}
	if code == http.StatusTooManyRequests || code == http.StatusForbidden {
		if d, ok := parseRetryAfter(h.Get("Retry-After"), now); ok {
			m.block(now.Add(d))
		} else if code == http.StatusTooManyRequests {
			m.block(now.Add(defaultThrottle))
		}
	}
}

// block holds requests back until t (never shortening a longer wait).
func (m *meter) block(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.After(m.until) {
		m.until = t
	}
}

func (m *meter) throttledUntil() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.until
}

// budgetWait is how long until the hourly budget has a request to spend
// again; zero when it has one now.
func (m *meter) budgetWait(now time.Time) time.Duration {
	missing := 1 - m.budget.TokensAt(now)
	if missing <= 0 || m.perHour <= 0 {
		return 0
	}
	return time.Duration(missing * 3600 / float64(m.perHour) * float64(time.Second))
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Duration(min(n, 86400)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// etagCache is a RoundTripper that makes GETs conditional: it keeps the last
// 200 answer with an ETag per URL and credential, sends If-None-Match, and
// turns a 304 into that answer again (marked with X-From-Cache). Entries are
// keyed by a hash of the Authorization header, never the header itself: an
// ETag is only honoured for the token it was issued to, and a rotated token
// starts afresh.
type etagCache struct {
	base http.RoundTripper

	mu      sync.Mutex
	entries *lru[*cacheEntry]
}

type cacheEntry struct {
	key    string
	etag   string
	header http.Header
	body   []byte
}

func newETagCache(base http.RoundTripper, maxEntries int) *etagCache {
	return &etagCache{base: base, entries: newLRU[*cacheEntry](maxEntries)}
}

func cacheKey(req *http.Request) string {
	sum := sha256.Sum256([]byte(req.Header.Get("Authorization")))
	return req.URL.String() + "\x00" + string(sum[:16])
}

// RoundTrip implements http.RoundTripper.
func (c *etagCache) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.Header.Get("Range") != "" {
		return c.base.RoundTrip(req)
	}
	key := cacheKey(req)
	cached := c.get(key)
	if cached != nil {
		req = req.Clone(req.Context())
		req.Header.Set("If-None-Match", cached.etag)
	}
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && cached != nil:
		resp.Body.Close()
		h := cached.header.Clone()
		for _, k := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "X-Ratelimit-Used", "Date"} {
			if v := resp.Header.Get(k); v != "" {
				h.Set(k, v)
			}
		}
		h.Set(fromCacheHeader, "1")
		return &http.Response{
			Status: "200 OK", StatusCode: http.StatusOK,
			Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
			Header: h, Body: io.NopCloser(bytes.NewReader(cached.body)),
			ContentLength: int64(len(cached.body)), Request: req,
		}, nil
	case resp.StatusCode == http.StatusOK && resp.Header.Get("ETag") != "":
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxCachedBody+1))
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if len(body) <= maxCachedBody {
			c.put(&cacheEntry{key: key, etag: resp.Header.Get("ETag"), header: resp.Header.Clone(), body: body})
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, nil
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		c.drop(key)
	}
	return resp, nil
}

func (c *etagCache) get(key string) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, _ := c.entries.get(key)
	return e
}

func (c *etagCache) put(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries.put(e.key, e)
}

func (c *etagCache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries.drop(key)
}
