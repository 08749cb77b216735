package secrets

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Redacted is what [Redactor.Redact] puts in place of a secret.
const Redacted = "[redacted]"

// minSecret is the shortest value redacted; shorter ones would mangle text
// without protecting anything.
const minSecret = 4

// keepPerSource is how many values of one changing source stay redacted.
const keepPerSource = 4

// Redactor removes secret values from text before it goes into an error, a
// log or an observation: the values of environment variables and secret
// files a [Source] handed out, and whatever else an adapter registers (an
// OAuth client secret, access tokens, installation tokens). It is safe for
// concurrent use: values are added while requests run (a file rotated, a
// token renewed). It stays bounded: of each changing source (a file, an
// access token) it keeps only the newest few values, so that an old token
// is still redacted for a while, and a token renewed every hour does not
// grow it forever. The zero value is ready to use.
type Redactor struct {
	mu      sync.Mutex
	fixed   []string            // values that do not change (environment variables)
	sources map[string][]string // per source, oldest first, at most keepPerSource

	// secrets is what Redact replaces, longest first: a snapshot rebuilt on
	// every change, so that Redact takes no lock.
	secrets atomic.Pointer[[]string]
}

// Add registers a value that does not change, such as an environment
// variable's.
func (r *Redactor) Add(s string) { r.AddFrom("", s) }

// AddFrom registers the current value s of the changing source named source
// (such as "file:/path" or "oauth2:access_token"); the oldest of the
// source's values beyond the newest few is forgotten. An empty source is
// Add. Values shorter than four bytes are not registered.
func (r *Redactor) AddFrom(source, s string) {
	if len(s) < minSecret {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if source == "" {
		if slices.Contains(r.fixed, s) {
			return
		}
		r.fixed = append(r.fixed, s)
	} else {
		vals := r.sources[source]
		if n := len(vals); n > 0 && vals[n-1] == s {
			return
		}
		vals = slices.DeleteFunc(vals, func(v string) bool { return v == s })
		vals = append(vals, s)
		if len(vals) > keepPerSource {
			vals = slices.Delete(vals, 0, len(vals)-keepPerSource)
		}
		if r.sources == nil {
			r.sources = map[string][]string{}
		}
		r.sources[source] = vals
	}
	all := slices.Clone(r.fixed)
	for _, vals := range r.sources {
		all = append(all, vals...)
	}
	// Longest first, so that a secret containing another is removed whole.
	slices.SortFunc(all, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	all = slices.Compact(all)
	r.secrets.Store(&all)
}

// Redact replaces every registered value in s with [Redacted].
func (r *Redactor) Redact(s string) string {
	secrets := r.secrets.Load()
	if secrets == nil {
		return s
	}
	for _, secret := range *secrets {
		s = strings.ReplaceAll(s, secret, Redacted)
	}
	return s
}

// Clean redacts s, replaces control characters and invalid UTF-8 with
// spaces, collapses white space and shortens it to at most n bytes (on a
// character boundary, marked with "…").
func (r *Redactor) Clean(s string, n int) string {
	s = strings.Map(func(c rune) rune {
		if unicode.IsControl(c) || c == utf8.RuneError {
			return ' '
		}
		return c
	}, s)
	s = strings.Join(strings.Fields(r.Redact(s)), " ")
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
