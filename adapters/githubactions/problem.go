package githubactions

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-github/v93/github"

	"github.com/jobbridge/jobbridge/adapters"
)

// maxProblemText bounds GitHub's words quoted in a problem.
const maxProblemText = 500

// problem describes a failed GitHub API call as an [adapters.CallError]:
// the request's method and path (no query, no host), the HTTP status, and
// GitHub's own message (with the messages of its errors list), redacted.
// Its class is throttled for the request budget or a rate limit in force
// (the caller sets it for a rate-limit answer, see [Adapter.apiError]), refused
// for a 401 or another 403, not_found for a 404 or 410, unreachable when no
// answer came, error otherwise. kind is the sentinel it wraps besides err;
// nil for none.
func (a *Adapter) problem(err, kind error) *adapters.CallError {
	ce := &adapters.CallError{Class: adapters.ProblemError, Err: err}
	if kind != nil {
		ce.Err = fmt.Errorf("%w: %w", kind, err)
	}
	var resp *http.Response
	var msg string
	if er, ok := errors.AsType[*github.ErrorResponse](err); ok {
		resp, msg = er.Response, er.Message
		for _, e := range er.Errors {
			if m := cmp.Or(e.Message, e.Code); m != "" && !strings.Contains(msg, m) {
				msg += "; " + m
			}
		}
	} else if re, ok := errors.AsType[*github.RateLimitError](err); ok {
		resp, msg = re.Response, re.Message
	} else if ae, ok := errors.AsType[*github.AbuseRateLimitError](err); ok {
		resp, msg = ae.Response, ae.Message
	}
	switch {
	case resp != nil:
		ce.Status = resp.StatusCode
		if resp.Request != nil {
			ce.Method, ce.Path = resp.Request.Method, a.red.Clean(resp.Request.URL.EscapedPath(), 200)
		}
	default:
		if ue, ok := errors.AsType[*url.Error](err); ok {
			if u, perr := url.Parse(ue.URL); perr == nil {
				ce.Method, ce.Path = strings.ToUpper(ue.Op), a.red.Clean(u.EscapedPath(), 200)
			}
			msg = ue.Err.Error()
		} else {
			msg = err.Error()
		}
		ce.Class = adapters.ProblemUnreachable
	}
	if resp == nil && errors.Is(err, errNotSent) {
		// Held back (a rate limit in force, the budget spent, no
		// installation token): nothing was sent, so nothing went unanswered.
		msg = strings.TrimSpace(ce.Method+" "+ce.Path) + " was not sent: " + msg
		ce.Method, ce.Path = "", ""
	}
	ce.Message = a.red.Clean(msg, maxProblemText)
	switch code := ce.Status; {
	case errors.Is(err, ErrRateLimited):
		ce.Class = adapters.ProblemThrottled
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		ce.Class = adapters.ProblemRefused
	case code == http.StatusNotFound || code == http.StatusGone:
		ce.Class = adapters.ProblemNotFound
	}
	return ce
}
