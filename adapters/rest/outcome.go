package rest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/jobbridge/jobbridge/adapters/expr"
)

// isDeclined is the default meaning of a 404, 409 or 410 answer to a cancel
// or respond call: the job may have finished, or may refuse; the caller
// finds out which.
const isDeclined = "declined"

// classify says what an answer to call c means: the meaning of the first
// outcome rule that matches it, or else the call's default. words are the
// backend's words for people: the matching rule's message when it has one,
// else the answer's own (see [Adapter.words]).
func (a *Adapter) classify(ctx context.Context, c *call, resp *http.Response, body []byte, ans expr.Answer) (is, words string) {
	code := resp.StatusCode
	if i, ok := a.matchRule(ctx, c, code, ans); ok {
		o := c.outcomes[i]
		words = a.words(resp, body)
		if !o.message.IsZero() {
			if m, present, err := o.message.Read(ctx, ans); err == nil && present {
				s, _ := expr.Text(m)
				if s = a.redactor.Clean(s, maxAPIText); s != "" {
					words = s
				}
			}
		}
		a.traceText(c, "rule", fmt.Sprintf("%s.outcomes[%d] matches HTTP %d → %s", c.name, i, code, o.is))
		return o.is, words
	}
	is = defaultOutcome(c.name, resp)
	a.traceText(c, "rule", fmt.Sprintf("HTTP %d → %s (default)", code, is))
	return is, a.words(resp, body)
}

// matchRule returns the index of the first outcome rule of c that matches
// the answer.
func (a *Adapter) matchRule(ctx context.Context, c *call, code int, ans expr.Answer) (int, bool) {
	for i, o := range c.outcomes {
		if len(o.status) > 0 && !slices.Contains(o.status, code) {
			continue
		}
		if o.when != nil {
			ok, err := o.when.Eval(ctx, ans.Vars)
			if err != nil {
				// A condition reading a field the answer lacks is false; any
				// other failure is the catalog's, and is logged.
				if !expr.MissingField(err) {
					a.log.Warn("outcome rule failed; skipping it", "call", c.name, "rule", i, "error", a.redactor.Redact(err.Error()))
				}
				continue
			}
			if ok != true {
				continue
			}
		}
		return i, true
	}
	return 0, false
}

// ruled returns, for a call with outcome rules, the function the retry
// policy asks before repeating a request: an answer a rule matches is the
// catalog's to read, and is not repeated (a 500 that means "no such job"
// is an answer, not a failure). It reads the body and puts it back.
func (a *Adapter) ruled(c *call, v *values) func(context.Context, *http.Response) bool {
	if len(c.outcomes) == 0 {
		return nil
	}
	return func(ctx context.Context, resp *http.Response) bool {
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			return false
		}
		_, ok := a.matchRule(ctx, c, resp.StatusCode, answerOf(v, resp.StatusCode, resp.Header, body))
		return ok
	}
}

// defaultOutcome is what an answer means when no outcome rule matches.
func defaultOutcome(callName string, resp *http.Response) string {
	code := resp.StatusCode
	ok := code >= 200 && code < 300
	gone := code == http.StatusNotFound || code == http.StatusGone
	switch callName {
	case "start":
		switch {
		case ok:
			return isSuccess
		case code == http.StatusTooManyRequests:
			return isRetryLater
		case code >= 400 && code < 500 && code != http.StatusRequestTimeout:
			return isRefused
		}
		return isUnknown
	case "cancel", "job_id.queue.cancel", "respond":
		switch {
		case ok:
			return isSuccess
		case isThrottle(resp):
			return isRetryLater
		case gone || code == http.StatusConflict:
			return isDeclined
		case callName != "respond" && code >= 400 && code < 500:
			return isRefused
		}
		return isError
	}
	// status, job_id.queue, find
	switch {
	case ok:
		return isSuccess
	case isThrottle(resp):
		return isRetryLater
	case gone && callName != "find":
		return isNotFound
	}
	return isError
}
