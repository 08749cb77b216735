package rest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/tidwall/gjson"

	"github.com/jobbridge/jobbridge/adapters"
)

// maxBody bounds how much of a response the adapter reads.
const maxBody = 1 << 20

// maxAPIText bounds the backend error text quoted in an error.
const maxAPIText = 500

// maxExcerpt bounds the excerpt of an unusable answer quoted in an error.
const maxExcerpt = 300

// Idle connections the adapter's transport keeps, so that concurrent calls
// reuse connections instead of opening one each: a Poll has up to
// pollConcurrency requests in flight, and the bridge runs several Polls of
// one backend at once (tasks/get, and its sweep's batches), all to one host.
const (
	idleConnsPerHost = 64
	idleConns        = 256
)

// newHTTPClient returns the client all requests go through: base's
// transport, no redirects, and the per-request timeout. An *http.Transport
// (by default one with http.DefaultTransport's settings) is cloned, dials
// through eg and uses no proxy, so that the egress check sees the backend's
// own address and no request leaves for a proxy named in the environment;
// the clone keeps at least idleConnsPerHost idle connections per host.
func newHTTPClient(base *http.Client, timeout time.Duration, eg *egress) *http.Client {
	var c http.Client
	if base != nil {
		c = *base
	}
	if c.Transport == nil {
		c.Transport = &http.Transport{
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          idleConns,
			MaxIdleConnsPerHost:   idleConnsPerHost,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
	}
	if t, ok := c.Transport.(*http.Transport); ok {
		t = t.Clone()
		t.Proxy = nil
		t.DialContext = eg.dialContext
		t.DialTLSContext = nil
		keepIdle(t)
		c.Transport = t
	}
	_, traced := c.Transport.(*http.Transport)
	c.Transport = &recordingTransport{base: c.Transport, traced: traced}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.Timeout = timeout
	return &c
}

// keepIdle raises t's idle-connection limits to idleConnsPerHost per host
// (the default is 2) and idleConns in all (zero, no limit, stays).
func keepIdle(t *http.Transport) {
	t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, idleConnsPerHost)
	if t.MaxIdleConns != 0 {
		t.MaxIdleConns = max(t.MaxIdleConns, idleConns)
	}
}

// sendRecord, put in a request's context, learns whether any attempt of the
// request may have reached the server.
type sendRecord struct{ maybeSent atomic.Bool }

type sendRecordKey struct{}

// recordingTransport fills in the request's sendRecord. An attempt certainly
// did not reach the server when dialling failed, or, with a transport that
// reports connection events, when it never got a connection.
//
// It deliberately has no CloseIdleConnections method: go-retryablehttp
// calls the client's after every failed or cancelled request, which would
// otherwise drop the idle connections the other requests of a Poll share.
type recordingTransport struct {
	base   http.RoundTripper
	traced bool
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec, _ := req.Context().Value(sendRecordKey{}).(*sendRecord)
	if rec == nil {
		return rt.base.RoundTrip(req)
	}
	var gotConn atomic.Bool
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
	})
	resp, err := rt.base.RoundTrip(req.WithContext(ctx))
	if err == nil || !(adapters.NotSent(err) || rt.traced && !gotConn.Load()) {
		rec.maybeSent.Store(true)
	}
	return resp, err
}

// retryable reports whether an attempt of a safe request may be repeated:
// after a connection error (but not a refused address or certificate, which
// would fail again) and after a 5xx other than 501. A 429, and a 503 with
// Retry-After, are throttling: the adapter reports them at once (see
// [Adapter.throttle]) and never repeats them, so that the bridge can pause
// every call to the backend instead of one request sleeping on it.
func retryable(ctx context.Context, resp *http.Response, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		var cert *tls.CertificateVerificationError
		var unknownCA x509.UnknownAuthorityError
		var hostname x509.HostnameError
		return !errors.Is(err, ErrAddressDenied) && !errors.As(err, &cert) &&
			!errors.As(err, &unknownCA) && !errors.As(err, &hostname)
	}
	if isThrottle(resp) {
		return false
	}
	return resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented
}

// backoff is the wait before retry attempt+1 (attempt counts from 0):
// exponential from retryWaitMin, capped at retryWaitMax, with equal jitter
// (a uniformly random wait between half and all of it), so that the
// retries of many requests spread out instead of arriving together.
func (a *Adapter) backoff(attempt int) time.Duration {
	d := a.retryWaitMin << min(attempt, 20)
	if d <= 0 || d > a.retryWaitMax {
		d = a.retryWaitMax
	}
	return d/2 + rand.N(d/2+1)
}

// do sends req through go-retryablehttp: while [retryable] allows and
// retries remain (RetryMax), it sends it again after [Adapter.backoff]. It
// never starts a wait that would outlast ctx's deadline: it returns the last
// answer instead. When ctx ends during a wait it returns ctx's error at once
// (the library's own ctx handling). giveUp, when set, is shared by the
// requests of one Poll: once one of them has used its retries without an
// answer, the others are not repeated either, and it is set then.
//
// Credentials. When req's context carries a signer (see [withSigner]), do
// calls it before the first try, so that the request carries the current
// secrets and access token. When the answer is 401 and the backend's
// credentials can change (secret files, an oauth2 block), do refreshes them
// ([credentials.refreshRejected]: cached files are re-read and the rejected
// token dropped), signs the request again and sends it once more; a second
// 401 is returned as it is. This holds for every request, a start and a
// cancel too: a 401 says that the request was not applied because it
// lacked valid credentials (RFC 9110, section 15.5.2), so repeating it
// cannot apply it twice.
//
// After the last try the answer is returned as it is (a 5xx response with a
// nil error, or the connection error), not as go-retryablehttp's "giving
// up" error. The answer returned has an open body; an error may come with a
// response, whose body is closed by closeBody.
func (a *Adapter) do(req *http.Request, retries int, giveUp *atomic.Bool) (*http.Response, error) {
	sign := signer(req.Context())
	if sign != nil {
		if err := sign(req); err != nil {
			return nil, &credentialsError{fmt.Errorf("the request's credentials: %w", err)}
		}
	}
	rreq, err := retryablehttp.FromRequest(req)
	if err != nil {
		return nil, fmt.Errorf("reading request body: %w", err)
	}
	resp, err := a.send(rreq, retries, giveUp)
	if resp != nil && resp.Request == nil {
		resp.Request = req // a test's RoundTripper may leave it out
	}
	if err != nil || resp.StatusCode != http.StatusUnauthorized || sign == nil ||
		!a.creds.refreshable() || req.Context().Err() != nil {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	a.creds.refreshRejected(req.Header.Get("Authorization"))
	if err := sign(req); err != nil {
		return nil, &credentialsError{fmt.Errorf("the request's credentials, after the backend answered 401: %w", err)}
	}
	resp, err = a.send(rreq, retries, giveUp)
	if resp != nil && resp.Request == nil {
		resp.Request = req
	}
	return resp, err
}

// send sends rreq as [Adapter.do] describes, without the credentials
// handling.
func (a *Adapter) send(rreq *retryablehttp.Request, retries int, giveUp *atomic.Bool) (*http.Response, error) {
	p := &retryPolicy{a: a, retries: retries, giveUp: giveUp}
	p.ruled, _ = rreq.Context().Value(ruledKey{}).(func(context.Context, *http.Response) bool)
	c := &retryablehttp.Client{
		HTTPClient:   a.once,
		RetryWaitMin: a.retryWaitMin,
		RetryWaitMax: a.retryWaitMax,
		RetryMax:     retries,
		CheckRetry:   p.checkRetry,
		Backoff:      p.backoff,
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	return c.Do(rreq)
}

// retryPolicy holds the go-retryablehttp hooks of one request, and what they
// share: the number of tries so far and the wait checkRetry has chosen.
// The library calls the hooks of one request one at a time.
type retryPolicy struct {
	a       *Adapter
	retries int
	giveUp  *atomic.Bool // shared by the requests of one Poll; may be nil

	tries int           // tries answered so far
	wait  time.Duration // the wait before the next try, chosen by checkRetry
	// ruled, when set, reports an answer an outcome rule of the catalog
	// reads: it is never repeated.
	ruled func(context.Context, *http.Response) bool
}

// ruledKey is the context key of a request's retryPolicy.ruled.
type ruledKey struct{}

// checkRetry is the CheckRetry hook. Besides [retryable], it stops retrying
// when the other requests of the Poll have given up, and when the wait
// before the next try would outlast ctx's deadline; it then returns false,
// so that the library returns this answer. When retries remain it chooses
// the wait (which backoff returns) and drains the unused answer so that its
// connection can be reused. After the last try it returns true and leaves
// it to RetryMax to stop and to the ErrorHandler to return the answer.
func (p *retryPolicy) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	attempt := p.tries
	p.tries++
	if !retryable(ctx, resp, err) {
		return false, nil
	}
	if resp != nil && p.ruled != nil && p.ruled(ctx, resp) {
		return false, nil
	}
	if attempt >= p.retries {
		if p.giveUp != nil && p.retries > 0 {
			p.giveUp.Store(true)
		}
		return true, nil
	}
	if p.giveUp != nil && p.giveUp.Load() {
		return false, nil
	}
	p.wait = p.a.backoff(attempt)
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < p.wait {
		return false, nil
	}
	if resp != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	}
	return true, nil
}

// backoff is the Backoff hook: the wait checkRetry chose for this retry.
func (p *retryPolicy) backoff(_, _ time.Duration, _ int, _ *http.Response) time.Duration {
	return p.wait
}

// isThrottle reports a throttling answer: a 429, or a 503 that says when
// to come back (Retry-After).
func isThrottle(resp *http.Response) bool {
	if resp == nil {
		return false
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return true
	}
	_, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return resp.StatusCode == http.StatusServiceUnavailable && ok
}

// throttle describes a throttling answer as an [adapters.ThrottledError]
// carrying the Retry-After pause (zero when the backend did not say) and
// the answer's problem, with words (the rule's message or the backend's).
func (a *Adapter) throttle(resp *http.Response, words string) error {
	d, _ := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return &adapters.ThrottledError{RetryAfter: d, Err: a.answered(adapters.ProblemThrottled, nil, resp, words)}
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, int64(24*time.Hour/time.Second))) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// sendSafe sends a safe call (a GET), retried as [Adapter.do] allows, and
// reads the answer. A request that got no answer, or whose answer could not
// be read, is an [adapters.CallError] of class unreachable; a request that
// could not be built is a plain error.
func (a *Adapter) sendSafe(ctx context.Context, c *call, v *values, retries int, giveUp *atomic.Bool) (*http.Response, []byte, error) {
	req, err := a.newRequest(ctx, c, v)
	if err != nil {
		return nil, nil, fmt.Errorf("the %s call cannot be made: %w", c.name, err)
	}
	if ruled := a.ruled(c, v); ruled != nil {
		req = req.WithContext(context.WithValue(req.Context(), ruledKey{}, ruled))
	}
	a.traceRequest(c, req)
	resp, err := a.do(req, retries, giveUp)
	if err != nil {
		closeBody(resp)
		a.traceText(c, "answer", "no answer: "+a.redactor.Redact(err.Error()))
		return nil, nil, a.unanswered(req, nil, err)
	}
	body, err := readBody(resp)
	if err != nil {
		ce := a.unanswered(req, nil, err)
		ce.Status = resp.StatusCode
		ce.Message = "reading the answer failed: " + ce.Message
		return nil, nil, ce
	}
	a.traceAnswer(c, resp, body)
	return resp, body, nil
}

// closeBody closes the body of a response that came with an error.
func closeBody(resp *http.Response) {
	if resp != nil {
		resp.Body.Close()
	}
}

// readBody reads and closes a response body of at most maxBody bytes.
func readBody(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxBody {
		return nil, fmt.Errorf("answer is larger than %d bytes", maxBody)
	}
	return b, nil
}

// reasonError is an error of a kind (one of the adapters sentinels) whose
// text is a reason written for people, without the kind's own text.
type reasonError struct {
	kind error
	msg  string
}

func reasonf(kind error, format string, args ...any) error {
	return &reasonError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

func (e *reasonError) Error() string { return e.msg }
func (e *reasonError) Unwrap() error { return e.kind }

// apiText picks the error message out of an error answer.
func apiText(body []byte) string {
	if gjson.ValidBytes(body) {
		for _, p := range []string{
			"error.message", "message", "error", "detail", "detail.0.msg",
			"errors.0.message", "errors.0.detail", "error_description", "title",
		} {
			if r := gjson.GetBytes(body, p); r.Type == gjson.String && r.String() != "" {
				return r.String()
			}
		}
	}
	return string(body)
}

func sameOrigin(u, base *url.URL) bool {
	return strings.EqualFold(u.Scheme, base.Scheme) &&
		strings.EqualFold(u.Hostname(), base.Hostname()) &&
		port(u) == port(base)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	return path.Clean(p)
}
