package rest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/tidwall/gjson"
)

// maxBody bounds how much of a response the adapter reads.
const maxBody = 1 << 20

// maxAPIText bounds the backend error text quoted in an error.
const maxAPIText = 300

// newHTTPClient returns the client all requests go through: base's
// transport, no redirects, and the per-request timeout. An *http.Transport
// (by default one with http.DefaultTransport's settings) is cloned, dials
// through eg and uses no proxy, so that the egress check sees the backend's
// own address and no request leaves for a proxy named in the environment.
func newHTTPClient(base *http.Client, timeout time.Duration, eg *egress) *http.Client {
	var c http.Client
	if base != nil {
		c = *base
	}
	if c.Transport == nil {
		c.Transport = &http.Transport{
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
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
		c.Transport = t
	}
	_, traced := c.Transport.(*http.Transport)
	c.Transport = &recordingTransport{base: c.Transport, traced: traced}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.Timeout = timeout
	return &c
}

// sendRecord, put in a request's context, learns whether any attempt of the
// request may have reached the server.
type sendRecord struct{ maybeSent atomic.Bool }

type sendRecordKey struct{}

// recordingTransport fills in the request's sendRecord. An attempt certainly
// did not reach the server when dialling failed, or, with a transport that
// reports connection events, when it never got a connection.
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
	if err == nil || !(isDialError(err) || rt.traced && !gotConn.Load()) {
		rec.maybeSent.Store(true)
	}
	return resp, err
}

// isDialError reports an error that happened before a connection existed.
func isDialError(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// checkRetry is the retry policy of safe requests: go-retryablehttp's
// default (connection errors, 429, 5xx except 501), except that a
// Retry-After longer than the longest wait ends the retries, and an address
// the egress rules refuse is not tried again.
func (a *Adapter) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if d, ok := throttleWait(resp); ok && d > a.retryWaitMax {
		return false, nil
	}
	if errors.Is(err, ErrAddressDenied) {
		return false, nil
	}
	return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
}

// backoff waits as long as Retry-After asks on 429 and 503, otherwise
// exponentially with jitter.
func (a *Adapter) backoff(lo, hi time.Duration, attempt int, resp *http.Response) time.Duration {
	if d, ok := throttleWait(resp); ok {
		return min(d, hi)
	}
	d := lo << min(attempt, 20)
	if d <= 0 || d > hi {
		d = hi
	}
	return d/2 + rand.N(d/2+1)
}

func throttleWait(resp *http.Response) (time.Duration, bool) {
	if resp == nil || resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return 0, false
	}
	return parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
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

// sendRetried sends a safe call, retrying it, and reads the answer.
func (a *Adapter) sendRetried(ctx context.Context, c *call, v *values) (*http.Response, []byte, error) {
	req, err := a.newRequest(ctx, c, v)
	if err != nil {
		return nil, nil, err
	}
	rreq, err := retryablehttp.FromRequest(req)
	if err != nil {
		return nil, nil, err
	}
	resp, err := a.retry.Do(rreq)
	if err != nil {
		closeBody(resp)
		return nil, nil, err
	}
	body, err := readBody(resp)
	if err != nil {
		return nil, nil, fmt.Errorf("reading answer: %w", err)
	}
	return resp, body, nil
}

// sendOnce sends a call that is not retried and for which 404, 409 and 410
// mean "the job is already finished": cancel and respond.
func (a *Adapter) sendOnce(ctx context.Context, c *call, v *values) error {
	req, err := a.newRequest(ctx, c, v)
	if err != nil {
		return err
	}
	resp, err := a.once.Do(req)
	if err != nil {
		return err
	}
	body, _ := readBody(resp) // only quoted in an error
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300, code == http.StatusNotFound, code == http.StatusConflict, code == http.StatusGone:
		return nil
	}
	return errors.New(a.statusText(resp, body))
}

// closeBody closes the body of a response that came with an error, as
// go-retryablehttp's pass-through error handler can return both.
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

// statusText describes an unwelcome answer: its status and the backend's
// error text, shortened, stripped of control characters and redacted.
func (a *Adapter) statusText(resp *http.Response, body []byte) string {
	s := "HTTP " + strconv.Itoa(resp.StatusCode)
	if t := a.redactor.clean(apiText(body), maxAPIText); t != "" {
		s += ": " + t
	}
	return s
}

// apiText picks the error message out of an error answer.
func apiText(body []byte) string {
	if gjson.ValidBytes(body) {
		for _, p := range []string{"error.message", "message", "error", "detail", "title", "errors.0.message"} {
			if r := gjson.GetBytes(body, p); r.Type == gjson.String && r.String() != "" {
				return r.String()
			}
		}
	}
	return string(body)
}

// redactor removes secret values (configured header values and the
// environment variables they reference) from backend text before it goes
// into an error, a log or an observation.
type redactor struct {
	secrets []string
}

// minSecret is the shortest value redacted; shorter ones would mangle text
// without protecting anything.
const minSecret = 4

func (r *redactor) add(s string) {
	if len(s) >= minSecret {
		r.secrets = append(r.secrets, s)
	}
}

// watch wraps getenv so that every value it returns is redacted.
func (r *redactor) watch(getenv func(string) (string, bool)) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := getenv(name)
		if ok {
			r.add(v)
		}
		return v, ok
	}
}

func (r *redactor) redact(s string) string {
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, "[redacted]")
	}
	return s
}

// clean redacts s, replaces control characters with spaces and shortens it
// to at most n bytes.
func (r *redactor) clean(s string, n int) string {
	s = strings.Map(func(c rune) rune {
		if unicode.IsControl(c) || c == utf8.RuneError {
			return ' '
		}
		return c
	}, s)
	s = strings.Join(strings.Fields(r.redact(s)), " ")
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
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
