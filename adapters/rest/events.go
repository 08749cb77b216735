package rest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/expr"
)

// EventsConfig is a rest backend's `events:` block: the job API calls the
// bridge back (POST /events/{backend}) when a job changes state, and the
// adapter reads each callback as an observation of the job, so that a task
// moves on without waiting for its next poll.
//
//	events:
//	  secret: ${JOBS_CALLBACK_SECRET}   # whsec_... for Standard Webhooks
//	  job_id: id                        # where the body names the job
//	  # signature: {scheme: standard_webhooks}   the default
//	  # tolerance: 5m, poll_interval: 10m, quiet: 30m
//
// Authentication. Every callback must be signed with HMAC-SHA256 under the
// shared secret, checked over the raw body before anything is read, in
// constant time. The schemes:
//
//   - standard_webhooks (the default): the Standard Webhooks specification.
//     Headers webhook-id, webhook-timestamp (Unix seconds) and
//     webhook-signature, a space-separated list of "v1,<base64 signature>"
//     (other versions, such as v1a, are skipped; one matching v1 entry
//     suffices). The signed content is "<id>.<timestamp>.<body>". The
//     secret is written as the API shows it, "whsec_" and base64; the key
//     is the decoded bytes.
//   - hmac_sha256_hex and hmac_sha256_base64: one header (signature.header,
//     required) holding the hex or base64 HMAC-SHA256 of the body, after
//     an optional signature.prefix such as "sha256=". With
//     timestamp_header, the signed content is "<timestamp>.<body>" and the
//     timestamp (Unix seconds or milliseconds, or RFC 3339) must be within
//     tolerance. The key is the secret's bytes as written.
//
// A delivery whose signature is missing or wrong is refused as forged (the
// bridge answers 401); one whose signed timestamp is more than tolerance
// before or after its receipt is refused as replayed (401). Without a
// signed timestamp only the bridge's de-duplication of id_header protects
// against a replay.
//
// Reading. The body must be JSON. events.when, when set, says which
// callbacks are job events: others (a ping, an event type the bridge does
// not handle) are acknowledged and ignored. events.job_id reads the job's
// ID, which must be the ID the tool's job_id gave (the task's job). The
// body is then read with status rules (field, states, message, finished_at,
// progress, result, error, input_requests, links): those of events.status
// when set; else those of tool events.tool; else the status rules of the
// backend's tools when they are all the same (a backend with one tool, or
// tools sharing a status block through a YAML anchor). A backend whose
// tools read their status differently must say which rules read a
// callback. The rules are compiled for a callback: they may read body,
// headers (lower-case names) and job.id, not args, correlation_id or
// status. A status value the states table does not list makes no event (it
// is logged); the next poll reads it.
type EventsConfig struct {
	// Secret is the shared HMAC secret: ${NAME} (an environment variable)
	// or ${file:/path} (a file, re-read when it changes), or literal text.
	// Required. It never appears in errors or logs.
	Secret string `yaml:"secret"`
	// Signature says where and how a callback is signed. Default: the
	// Standard Webhooks scheme.
	Signature SignatureConfig `yaml:"signature"`
	// TimestampHeader names the header with the signed timestamp. Default
	// webhook-timestamp for standard_webhooks; none for the hmac schemes.
	TimestampHeader string `yaml:"timestamp_header"`
	// IDHeader names the header identifying the delivery, the same on a
	// redelivery (the event's ID, by which the bridge drops a duplicate).
	// Default webhook-id. Standard Webhooks signs it; the hmac schemes do
	// not, so there it only de-duplicates honest redeliveries.
	IDHeader string `yaml:"id_header"`
	// Tolerance is how far a signed timestamp may be from the delivery's
	// receipt, before or after. Default 5m.
	Tolerance time.Duration `yaml:"tolerance"`
	// JobID reads the job's ID from the callback: a JSON path into the body
	// ("id", "job.id") or an "=" expression over body and headers.
	// Required.
	JobID string `yaml:"job_id"`
	// At, when set, reads when the job reached the state the callback
	// reports (RFC 3339, or Unix seconds), so that a late callback cannot
	// move a task back. Default: the job's finished_at for a final state,
	// otherwise unknown.
	At string `yaml:"at"`
	// When, when set, is a CEL condition over body and headers: a callback
	// for which it is false is acknowledged and ignored.
	When string `yaml:"when"`
	// Tool names the tool whose status rules read a callback.
	Tool string `yaml:"tool"`
	// Status, when set, are the status rules that read a callback (only
	// their reading fields: a callback is not fetched).
	Status *StatusConfig `yaml:"status"`
	// PollInterval is how often a job that has had a callback is still
	// polled while callbacks flow, in case one is lost. Default 10m.
	PollInterval time.Duration `yaml:"poll_interval"`
	// Quiet is how long the API may send no callback at all before every
	// job is polled at its tool's refresh interval again. Default 30m.
	Quiet time.Duration `yaml:"quiet"`
}

// SignatureConfig says where and how a callback is signed.
type SignatureConfig struct {
	// Header names the signature header. Default webhook-signature for
	// standard_webhooks; required for the hmac schemes.
	Header string `yaml:"header"`
	// Scheme is standard_webhooks (default), hmac_sha256_hex or
	// hmac_sha256_base64.
	Scheme string `yaml:"scheme"`
	// Prefix, for the hmac schemes, is text before the signature in the
	// header, such as "sha256=".
	Prefix string `yaml:"prefix"`
}

// The signature schemes.
const (
	schemeStandardWebhooks = "standard_webhooks"
	schemeHexHMAC          = "hmac_sha256_hex"
	schemeBase64HMAC       = "hmac_sha256_base64"
)

// Defaults of the events block.
const (
	defaultTolerance         = 5 * time.Minute
	defaultEventPollInterval = 10 * time.Minute
	defaultEventQuiet        = 30 * time.Minute
	maxTolerance             = 24 * time.Hour
	whsecPrefix              = "whsec_"
)

// SetDefaults fills the fields the operator left out; see the field
// documentation.
func (c *EventsConfig) SetDefaults() {
	if c.Signature.Scheme == "" {
		c.Signature.Scheme = schemeStandardWebhooks
	}
	if c.Signature.Scheme == schemeStandardWebhooks {
		if c.Signature.Header == "" {
			c.Signature.Header = "webhook-signature"
		}
		if c.TimestampHeader == "" {
			c.TimestampHeader = "webhook-timestamp"
		}
	}
	if c.IDHeader == "" {
		c.IDHeader = "webhook-id"
	}
	if c.Tolerance == 0 {
		c.Tolerance = defaultTolerance
	}
	if c.PollInterval == 0 {
		c.PollInterval = defaultEventPollInterval
	}
	if c.Quiet == 0 {
		c.Quiet = defaultEventQuiet
	}
}

// validate reports every problem in the events block, each as an
// [adapters.FieldError] whose path is relative to the backend block
// ("events.secret"). It works on a copy with defaults applied. Whether the
// status rules can be chosen depends on the backend's tools and is checked
// by [New].
func (c *EventsConfig) validate() []error {
	cfg := *c
	cfg.SetDefaults()
	var errs []error
	if cfg.Secret == "" {
		errs = append(errs, adapters.Fieldf("events.secret", "required: a callback endpoint without a secret would accept forged events"))
	} else if _, err := parseCredential(cfg.Secret); err != nil {
		errs = append(errs, credentialFieldErr("events.secret", err))
	}
	sig := cfg.Signature
	switch sig.Scheme {
	case schemeStandardWebhooks:
		if sig.Prefix != "" {
			errs = append(errs, adapters.Fieldf("events.signature.prefix", "only for the %s and %s schemes (a Standard Webhooks signature is a list of \"v1,<base64>\")", schemeHexHMAC, schemeBase64HMAC))
		}
	case schemeHexHMAC, schemeBase64HMAC:
		if sig.Header == "" {
			errs = append(errs, adapters.Fieldf("events.signature.header", "required for scheme %s: the header the job API sends its signature in (e.g. X-Signature)", sig.Scheme))
		}
		if strings.ContainsAny(sig.Prefix, "\r\n\x00") {
			errs = append(errs, adapters.Fieldf("events.signature.prefix", "contains a line break or NUL"))
		}
	default:
		errs = append(errs, adapters.Fieldf("events.signature.scheme", "%q is not one of %s, %s, %s", sig.Scheme, schemeStandardWebhooks, schemeHexHMAC, schemeBase64HMAC))
	}
	for _, h := range []struct{ path, name string }{
		{"events.signature.header", sig.Header},
		{"events.timestamp_header", cfg.TimestampHeader},
		{"events.id_header", cfg.IDHeader},
	} {
		if h.name != "" && !validHeaderName(h.name) {
			errs = append(errs, adapters.Fieldf(h.path, "%q is not a valid header name", h.name))
		}
	}
	if cfg.Tolerance < time.Second || cfg.Tolerance > maxTolerance {
		errs = append(errs, adapters.Fieldf("events.tolerance", "must be between 1s and %s", maxTolerance))
	}
	if cfg.PollInterval < time.Second {
		errs = append(errs, adapters.Fieldf("events.poll_interval", "must be at least 1s"))
	}
	if cfg.Quiet < time.Second {
		errs = append(errs, adapters.Fieldf("events.quiet", "must be at least 1s"))
	}
	_, rerrs := compileCallbackReads(&cfg)
	errs = append(errs, rerrs...)
	switch {
	case cfg.Tool != "" && cfg.Status != nil:
		errs = append(errs, adapters.Fieldf("events.tool", "set only one of tool and status"))
	case cfg.Status != nil:
		errs = append(errs, statusCallErrs(cfg.Status)...)
		_, serrs := compileCallbackRules("", cfg.Status)
		errs = append(errs, prefixFields("events.", errors.Join(serrs...)))
	}
	return errs
}

// statusCallErrs reports the call fields of events.status: a callback is
// read, not fetched.
func statusCallErrs(s *StatusConfig) []error {
	var errs []error
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"method", s.Method != ""}, {"path", s.Path != ""}, {"query", len(s.Query) > 0},
		{"headers", len(s.Headers) > 0}, {"body", s.Body != nil}, {"outcomes", len(s.Outcomes) > 0},
	} {
		if f.set {
			errs = append(errs, adapters.Fieldf("events.status."+f.name, "a callback is not fetched: events.status takes only the fields that read an answer (field, states, message, finished_at, progress, result, error, input_requests, links)"))
		}
	}
	return errs
}

// callbacks is a backend's compiled events block.
type callbacks struct {
	cfg    EventsConfig // defaults applied
	secret expr.Template
	reads  callbackReads
	// rules reads the body: its states, readings and links (no calls).
	rules *tool
}

// newCallbacks compiles the events block of a backend whose tools are
// given, choosing the status rules that read a callback (see
// [EventsConfig]), and resolves the secret once so that an unset variable
// or unreadable file is reported at start.
func (a *Adapter) newCallbacks(cfg EventsConfig, tools map[string]JobConfig) (*callbacks, error) {
	cfg.SetDefaults()
	cb := &callbacks{cfg: cfg}
	var errs []error
	secret, err := parseCredential(cfg.Secret)
	if err != nil {
		return nil, nil // validate reported it
	}
	cb.secret = secret
	if _, err := cb.key(a); err != nil {
		errs = append(errs, adapters.Fieldf("events.secret", "%w", err))
	}
	cb.reads, _ = compileCallbackReads(&cfg) // validate reported problems

	var rules *StatusConfig
	name := cfg.Tool
	switch {
	case cfg.Status != nil:
		rules, name = cfg.Status, "events.status"
	case cfg.Tool != "":
		job, ok := tools[cfg.Tool]
		if !ok {
			errs = append(errs, adapters.Fieldf("events.tool", "the backend has no tool %q (it has %s)", cfg.Tool, toolList(tools)))
			break
		}
		rules = &job.Status
	default:
		names := sortedKeys(tools)
		for _, n := range names {
			s := tools[n].Status
			if rules == nil {
				rules, name = &s, n
				continue
			}
			if !sameReadings(*rules, s) {
				errs = append(errs, adapters.Fieldf("events", "the backend's tools read their status differently (%s), and a callback does not say which tool its job belongs to: say which status rules read a callback with events.tool or events.status", toolList(tools)))
				rules = nil
				break
			}
		}
		if len(names) == 0 {
			errs = append(errs, adapters.Fieldf("events", "the backend has no tools, so no status rules read a callback: write events.status"))
		}
	}
	if rules != nil {
		t, rerrs := compileCallbackRules(name, rules)
		switch {
		case len(rerrs) > 0 && cfg.Status != nil:
			// validate reported them
		case len(rerrs) > 0:
			errs = append(errs, fmt.Errorf("events: the status rules of tool %q read callbacks (events.status is not set), but: %w; write events.status for callbacks",
				name, errors.Join(rerrs...)))
		default:
			cb.rules = t
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cb, nil
}

// sameReadings reports whether two status blocks read an answer alike (their
// calls may differ).
func sameReadings(x, y StatusConfig) bool {
	x.Call, y.Call = Call{}, Call{}
	return reflect.DeepEqual(x, y)
}

func toolList(tools map[string]JobConfig) string {
	names := sortedKeys(tools)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// key returns the HMAC key: the secret's current value, base64-decoded
// after "whsec_" for Standard Webhooks. Its errors name the variable or the
// file, never a value.
func (cb *callbacks) key(a *Adapter) ([]byte, error) {
	s, err := a.creds.render(cb.secret)
	if err != nil {
		return nil, err
	}
	a.redactor.AddFrom("events:secret", s) // also a literal one
	if s == "" {
		return nil, errors.New("is empty")
	}
	if cb.cfg.Signature.Scheme != schemeStandardWebhooks {
		return []byte(s), nil
	}
	a.redactor.AddFrom("events:secret:base64", strings.TrimPrefix(s, whsecPrefix))
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, whsecPrefix))
	if err != nil || len(k) == 0 {
		return nil, errors.New("is not a Standard Webhooks secret: write it as the job API shows it, whsec_ followed by base64")
	}
	return k, nil
}

// Events reports whether the backend has an events block, and how the
// bridge polls its jobs while callbacks flow.
func (a *Adapter) Events() (adapters.EventPolling, bool) {
	if a.callbacks == nil {
		return adapters.EventPolling{}, false
	}
	return adapters.EventPolling{Interval: a.callbacks.cfg.PollInterval, Quiet: a.callbacks.cfg.Quiet}, true
}

// ReadEvents authenticates one callback and reads the job event it
// carries; see [EventsConfig] for the signature schemes and the rules that
// read it.
func (a *Adapter) ReadEvents(ctx context.Context, d adapters.Delivery) ([]adapters.Event, error) {
	cb := a.callbacks
	if cb == nil {
		return nil, fmt.Errorf("rest backend %q has no events block", a.name)
	}
	key, err := cb.key(a)
	if err != nil {
		return nil, fmt.Errorf("reading a callback: events.secret: %w", err)
	}
	signedAt, signed, err := cb.verify(key, d)
	if err != nil {
		return nil, fmt.Errorf("reading a callback: %w", err)
	}
	if signed {
		received := d.ReceivedAt
		if received.IsZero() {
			received = a.now()
		}
		if skew := received.Sub(signedAt); skew > cb.cfg.Tolerance || -skew > cb.cfg.Tolerance {
			when := "before"
			if skew < 0 {
				when, skew = "after", -skew
			}
			return nil, fmt.Errorf("reading a callback: %w", reasonf(adapters.ErrReplayedEvent,
				"its signed timestamp (%s) is %s %s its receipt, outside the %s replay window",
				signedAt.UTC().Format(time.RFC3339), skew.Round(time.Second), when, cb.cfg.Tolerance))
		}
	}

	decoded, err := expr.DecodeJSON(d.Body)
	if err != nil {
		return nil, fmt.Errorf("reading a callback: the body is not JSON: %s", a.excerpt(d.Body))
	}
	headers := make(map[string]string, len(d.Header))
	for k, vs := range d.Header {
		if len(vs) > 0 {
			headers[strings.ToLower(k)] = vs[0]
		}
	}
	vars := expr.Vars{expr.Body: decoded, expr.Headers: headers}
	ans := expr.Answer{Raw: d.Body, Vars: vars}
	if w := cb.reads.when; w != nil {
		ok, err := w.Eval(ctx, vars)
		switch {
		case err != nil && !expr.MissingField(err):
			return nil, fmt.Errorf("reading a callback: events.when failed: %s", a.redactor.Redact(err.Error()))
		case err != nil || ok != true:
			return nil, nil // not a job event
		}
	}
	jobID, err := cb.jobID(ctx, a, ans)
	if err != nil {
		return nil, fmt.Errorf("reading a callback: %w", err)
	}

	v := &values{jobID: jobID, baseURL: a.baseURL}
	vars = v.vars()
	delete(vars, expr.Args)
	delete(vars, expr.CorrelationID)
	vars[expr.Body], vars[expr.Headers] = decoded, headers
	ans = expr.Answer{Raw: d.Body, Vars: vars}
	t := cb.rules
	if raw, ok, err := t.read.field.Read(ctx, ans); err == nil && ok {
		if s, kind := scalarText(raw); kind == "" {
			if _, known := t.states[s]; !known {
				a.log.Warn("callback with a status the states table does not list; ignoring it (the next poll reads it)",
					"job", a.redactor.Clean(jobID, maxShownID), "status", a.redactor.Clean(s, 100))
				return nil, nil
			}
		}
	}
	o := a.observe(ctx, t, adapters.JobRef{ID: jobID}, v, &http.Response{Header: http.Header{}}, d.Body, ans)
	if o.Err != nil {
		return nil, fmt.Errorf("reading the callback about job %s: %w", a.redactor.Clean(jobID, maxShownID), o.Err)
	}
	at := o.FinishedAt
	if !cb.reads.at.IsZero() {
		if at, err = cb.at(ctx, a, ans); err != nil {
			return nil, fmt.Errorf("reading the callback about job %s: %w", a.redactor.Clean(jobID, maxShownID), err)
		}
	}
	return []adapters.Event{{
		ID:          d.Header.Get(cb.cfg.IDHeader),
		JobID:       jobID,
		At:          at,
		Observation: o,
	}}, nil
}

// jobID reads events.job_id.
func (cb *callbacks) jobID(ctx context.Context, a *Adapter, ans expr.Answer) (string, error) {
	f := cb.reads.jobID
	val, ok, err := f.Read(ctx, ans)
	switch {
	case err != nil:
		return "", fmt.Errorf("reading the job ID (events.job_id %s) failed: %s", f, a.redactor.Redact(err.Error()))
	case !ok && f.IsNull(ans):
		return "", fmt.Errorf("the job ID at %q (events.job_id) is null; body: %s", f, a.excerpt(ans.Raw))
	case !ok && f.Program() != nil:
		return "", fmt.Errorf("events.job_id %s gives no job ID for this callback; body: %s", f, a.excerpt(ans.Raw))
	case !ok:
		return "", fmt.Errorf("the callback has no job ID at %q (events.job_id); body: %s", f, a.excerpt(ans.Raw))
	}
	s, kind := scalarText(val)
	switch {
	case kind != "":
		return "", fmt.Errorf("the job ID at %q (events.job_id) is %s, not a string or number", f, kind)
	case s == "":
		return "", fmt.Errorf("the job ID at %q (events.job_id) is empty", f)
	}
	return s, nil
}

// at reads events.at: RFC 3339 text or Unix seconds; absent is unknown.
func (cb *callbacks) at(ctx context.Context, a *Adapter, ans expr.Answer) (time.Time, error) {
	f := cb.reads.at
	val, ok, err := f.Read(ctx, ans)
	if err != nil {
		return time.Time{}, fmt.Errorf("reading events.at %s failed: %s", f, a.redactor.Redact(err.Error()))
	}
	if !ok {
		return time.Time{}, nil
	}
	if _, isText := val.(string); !isText {
		if n, isNum := number(val, true); isNum {
			sec, frac := math.Modf(n)
			return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
		}
	}
	s, _ := expr.Text(val)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("events.at %s is %q, not an RFC 3339 time or Unix seconds", f, a.redactor.Clean(s, 100))
	}
	return t, nil
}

// verify checks the delivery's signature over its raw body. It returns the
// signed timestamp when the scheme signs one.
func (cb *callbacks) verify(key []byte, d adapters.Delivery) (time.Time, bool, error) {
	cfg := cb.cfg
	forged := func(format string, args ...any) (time.Time, bool, error) {
		return time.Time{}, false, reasonf(adapters.ErrForgedEvent, format, args...)
	}
	var ts string
	if cfg.TimestampHeader != "" {
		ts = d.Header.Get(cfg.TimestampHeader)
		if ts == "" {
			return forged("it has no %s header (the signed timestamp)", cfg.TimestampHeader)
		}
	}
	sigHeader := d.Header.Get(cfg.Signature.Header)
	if sigHeader == "" {
		return forged("it has no %s header (the signature)", cfg.Signature.Header)
	}
	mac := hmac.New(sha256.New, key)
	switch cfg.Signature.Scheme {
	case schemeStandardWebhooks:
		id := d.Header.Get(cfg.IDHeader)
		if id == "" {
			return forged("it has no %s header (the signed message ID)", cfg.IDHeader)
		}
		mac.Write([]byte(id + "." + ts + "."))
		mac.Write(d.Body)
		want := mac.Sum(nil)
		matched, v1 := false, 0
		for _, entry := range strings.Fields(sigHeader) {
			version, sig, ok := strings.Cut(entry, ",")
			if !ok || version != "v1" {
				continue // another scheme (v1a) or not a signature
			}
			v1++
			got, err := base64.StdEncoding.DecodeString(sig)
			if err == nil && hmac.Equal(got, want) {
				matched = true
			}
		}
		switch {
		case v1 == 0:
			return forged("its %s header has no v1 signature", cfg.Signature.Header)
		case !matched:
			return forged("no v1 signature in its %s header matches the body", cfg.Signature.Header)
		}
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			return time.Time{}, false, reasonf(adapters.ErrReplayedEvent, "its %s header is not Unix seconds, so its age cannot be checked", cfg.TimestampHeader)
		}
		return time.Unix(sec, 0), true, nil
	default:
		sig, ok := strings.CutPrefix(strings.TrimSpace(sigHeader), cfg.Signature.Prefix)
		if !ok {
			return forged("its %s header does not start with the configured prefix", cfg.Signature.Header)
		}
		got, err := decodeSignature(cfg.Signature.Scheme, strings.TrimSpace(sig))
		if err != nil {
			return forged("its %s header is not a %s signature", cfg.Signature.Header, strings.TrimPrefix(cfg.Signature.Scheme, "hmac_sha256_"))
		}
		if ts != "" {
			mac.Write([]byte(ts + "."))
		}
		mac.Write(d.Body)
		if !hmac.Equal(got, mac.Sum(nil)) {
			return forged("the signature in its %s header does not match the body", cfg.Signature.Header)
		}
		if ts == "" {
			return time.Time{}, false, nil
		}
		at, ok := parseSignedTime(ts)
		if !ok {
			return time.Time{}, false, reasonf(adapters.ErrReplayedEvent, "its %s header is not a Unix time or an RFC 3339 time, so its age cannot be checked", cfg.TimestampHeader)
		}
		return at, true, nil
	}
}

// decodeSignature decodes a hex or base64 (standard or URL alphabet,
// padded or not) signature.
func decodeSignature(scheme, s string) ([]byte, error) {
	if scheme == schemeHexHMAC {
		return hex.DecodeString(s)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

// parseSignedTime reads a timestamp header: Unix seconds, Unix milliseconds
// (a number of 13 digits or more) or RFC 3339.
func parseSignedTime(s string) (time.Time, bool) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n >= 1e12 || n <= -1e12 {
			return time.UnixMilli(n), true
		}
		return time.Unix(n, 0), true
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

var _ adapters.EventSource = (*Adapter)(nil)
