package rest

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"html"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/jobbridge/jobbridge/adapters"
)

// maxShownPath bounds a request path quoted in an error.
const maxShownPath = 200

// answered is the problem of an answer that was not what was asked: the
// request's method and path (redacted, without the query), the answer's
// HTTP status and message, the backend's words (an outcome rule's message,
// or an excerpt of the answer; see [Adapter.words]). kind is the sentinel
// it wraps, nil for none.
func (a *Adapter) answered(class adapters.ProblemClass, kind error, resp *http.Response, message string) *adapters.CallError {
	ce := &adapters.CallError{Class: class, Status: resp.StatusCode, Message: message, Err: kind}
	if resp.Request != nil {
		ce.Method, ce.Path = resp.Request.Method, a.shownPath(resp.Request.URL)
	}
	return ce
}

// unanswered is the problem of a request that got no answer (or whose
// answer could not be read to its end): the request's method and path and
// what went wrong on the way, without the URL the transport's error quotes.
// kind is the sentinel it wraps besides err, nil for none.
func (a *Adapter) unanswered(req *http.Request, kind, err error) *adapters.CallError {
	ce := &adapters.CallError{Class: adapters.ProblemUnreachable, Err: err}
	if kind != nil {
		ce.Err = fmt.Errorf("%w: %w", kind, err)
	}
	if req != nil {
		ce.Method, ce.Path = req.Method, a.shownPath(req.URL)
	}
	var cred *credentialsError
	if errors.As(err, &cred) {
		// Nothing was sent: the request's own secrets could not be had.
		ce.Class = adapters.ProblemError
		ce.Message = a.redactor.Clean(fmt.Sprintf("%s %s was not sent: %v", ce.Method, ce.Path, cred), maxAPIText)
		ce.Method, ce.Path = "", ""
		return ce
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text quotes the whole URL
	}
	ce.Message = a.redactor.Clean(err.Error(), maxAPIText)
	return ce
}

// shownPath is a request path as errors show it: escaped, redacted,
// without query or host, and cut short.
func (a *Adapter) shownPath(u *url.URL) string {
	if u == nil {
		return ""
	}
	return a.redactor.Clean(u.EscapedPath(), maxShownPath)
}

// statusClass is the problem class of an unwelcome answer that is neither
// throttling nor a missing job: refused for a 401 or 403, else error.
func statusClass(code int) adapters.ProblemClass {
	if code == http.StatusUnauthorized || code == http.StatusForbidden {
		return adapters.ProblemRefused
	}
	return adapters.ProblemError
}

// credentialsError is a request that was not sent because its secrets or
// its access token could not be had.
type credentialsError struct{ err error }

func (e *credentialsError) Error() string { return e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }

// words are the backend's own words in an unwelcome answer, for people:
// the answer's error message field (see [apiText]) or its text, redacted,
// stripped of control characters and cut to maxAPIText bytes; an HTML
// page is summarized by its title or the start of its text, not quoted. Empty for an empty answer.
func (a *Adapter) words(resp *http.Response, body []byte) string {
	if s, ok := a.htmlSummary(resp.Header, body); ok {
		return s
	}
	if t := bytes.TrimSpace(body); bytes.Equal(t, []byte("{}")) || bytes.Equal(t, []byte("[]")) || bytes.Equal(t, []byte("null")) {
		return "" // nothing to quote
	}
	return a.redactor.Clean(apiText(body), maxAPIText)
}

// maxHTMLText bounds what an HTML answer's summary quotes of it.
const maxHTMLText = 100

// Patterns that summarize an HTML page: its title, its scripts and styles
// (left out) and its tags (taken for spaces).
var (
	titleRE  = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)
	scriptRE = regexp.MustCompile(`(?is)<(script|style)[^>]*>.*?</(script|style)>`)
	tagRE    = regexp.MustCompile(`(?s)<[^>]*>`)
)

// htmlSummary summarizes an HTML answer (a proxy's error page, a login
// page) as "an HTML page" with its title, or else the start of its text
// without tags, scripts and styles, when body is one: its Content-Type
// says text/html, or it starts like an HTML document.
func (a *Adapter) htmlSummary(h http.Header, body []byte) (string, bool) {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	head := bytes.ToLower(bytes.TrimSpace(body[:min(len(body), 512)]))
	isHTML := mt == "text/html" || mt == "application/xhtml+xml" ||
		bytes.HasPrefix(head, []byte("<!doctype html")) || bytes.HasPrefix(head, []byte("<html"))
	if !isHTML || len(bytes.TrimSpace(body)) == 0 {
		return "", false
	}
	if m := titleRE.FindSubmatch(body); m != nil {
		if title := a.redactor.Clean(html.UnescapeString(string(m[1])), maxHTMLText); title != "" {
			return fmt.Sprintf("an HTML page titled %q", title), true
		}
	}
	text := scriptRE.ReplaceAll(body, []byte(" "))
	text = tagRE.ReplaceAll(text, []byte(" "))
	if s := a.redactor.Clean(html.UnescapeString(string(text)), maxHTMLText); s != "" {
		return fmt.Sprintf("an HTML page reading %q", s), true
	}
	return fmt.Sprintf("an HTML page of %d bytes", len(body)), true
}

// excerpt is a short, redacted, printable extract of an answer for an
// error message; an HTML page is summarized.
func (a *Adapter) excerpt(body []byte) string {
	if s, ok := a.htmlSummary(nil, body); ok {
		return s
	}
	if s := a.redactor.Clean(string(body), maxExcerpt); s != "" {
		return s
	}
	return "(empty)"
}

// unmappedState is the problem of a status value that states: does not
// map: it names the value and the values that are mapped, in the order of
// the states they map to.
func unmappedState(t *tool, value string, clean func(string, int) string) *adapters.CallError {
	return &adapters.CallError{
		Class: adapters.ProblemUnmapped,
		Err:   adapters.ErrUnmappedState,
		Message: fmt.Sprintf("the backend reports state `%s`, which the catalog does not map; mapped: %s",
			clean(value, 100), strings.Join(t.mappedValues(), ", ")),
	}
}

// mappedValues lists the status values states: maps, ordered by the state
// each maps to (working first), then by value.
func (t *tool) mappedValues() []string {
	vals := make([]string, 0, len(t.states))
	for v := range t.states {
		vals = append(vals, v)
	}
	slices.SortFunc(vals, func(x, y string) int {
		return cmp.Or(cmp.Compare(t.states[x], t.states[y]), strings.Compare(x, y))
	})
	return vals
}
