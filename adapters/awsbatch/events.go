package awsbatch

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/secrets"
)

// The envelope values of the one event type the adapter reads.
const (
	eventSource     = "aws.batch"
	eventDetailType = "Batch Job State Change"
)

var _ adapters.EventSource = (*Adapter)(nil)

// eventReader authenticates and reads the deliveries of one backend's
// EventBridge API destination.
type eventReader struct {
	header string // the API key's header, canonical
	// key is the API key's reference, resolved through keys at every
	// delivery: an environment variable's value, read once, or a file's,
	// read again whenever it changes, so that a rotated key takes effect
	// without a restart (see package secrets).
	key     secrets.Ref
	keys    *secrets.Source
	maxAge  time.Duration
	polling adapters.EventPolling
}

// newEventReader reads the events block's key. Its errors are
// [adapters.FieldError]s under "events." that name the variable or file and
// never quote a value.
func newEventReader(c *EventsConfig, getenv func(string) (string, bool), log *slog.Logger) (*eventReader, error) {
	ref, err := parseKeyRef(c.APIKey)
	if err != nil {
		return nil, adapters.Fieldf("events.api_key", "%v", err)
	}
	keys := secrets.NewSource(&secrets.Options{Getenv: getenv, Check: checkKey, Logger: log})
	if _, err := keys.Value(ref); err != nil {
		return nil, adapters.Fieldf("events.api_key", "%v", err)
	}
	return &eventReader{
		header:  http.CanonicalHeaderKey(c.APIKeyHeader),
		key:     ref,
		keys:    keys,
		maxAge:  c.MaxAge,
		polling: adapters.EventPolling{Interval: c.PollInterval, Quiet: c.Quiet},
	}, nil
}

// checkKey checks a key's value; its errors complete "environment variable
// X ..." or "secret file X ..." and never quote the value.
func checkKey(v string) error {
	switch {
	case strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return errors.New("holds a control character or line break")
	case strings.TrimSpace(v) != v:
		return errors.New("begins or ends with a space")
	case len(v) < minAPIKeyLength:
		return fmt.Errorf("holds a key shorter than %d characters: use a long random one (32 random bytes, base64-encoded, say)", minAPIKeyLength)
	case len(v) > maxAPIKeyLength:
		return fmt.Errorf("holds a key longer than %d characters, which an EventBridge connection cannot send", maxAPIKeyLength)
	}
	return nil
}

// sameKey compares a presented key with the configured one in constant
// time, also of their lengths: it compares their SHA-256 digests.
func sameKey(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// Events implements [adapters.EventSource]: events flow when the backend
// has an `events:` block, and the bridge then polls their jobs every
// poll_interval and falls back to the tools' refresh intervals after quiet.
func (a *Adapter) Events() (adapters.EventPolling, bool) {
	if a.events == nil {
		return adapters.EventPolling{}, false
	}
	return a.events.polling, true
}

// envelope is an EventBridge event as an API destination posts it: the
// whole event, unless the rule's target has an input transformer (which
// must not be used with the bridge).
type envelope struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// ReadEvents implements [adapters.EventSource] for deliveries of an
// EventBridge API destination whose connection has API key authorization.
//
// The delivery must carry the api_key_header exactly once, with the
// configured key (compared in constant time); otherwise the error wraps
// [adapters.ErrForgedEvent]. Only then is the body read: one event
// envelope. An event whose source is not aws.batch or whose detail-type is
// not "Batch Job State Change" (Batch Job Queue Blocked, Batch Service Job
// State Change, anything AWS adds) gives no event. An envelope whose time
// is more than max_age before d.ReceivedAt is refused with an error
// wrapping [adapters.ErrReplayedEvent]; nothing else dates a delivery,
// since an API destination signs no timestamp, so within max_age the
// bridge's de-duplication of the envelope id (Event.ID, kept by a
// redelivery) is the replay defence.
//
// The detail, which Batch documents as resembling DescribeJobs' JobDetail,
// is decoded into the SDK's [types.JobDetail] (encoding/json matches the
// model's member names, such as jobId, to its fields; unknown members are
// ignored, as AWS asks of event readers) and observed by the very code that
// observes a DescribeJobs answer: state, message, result with exit code and
// log stream, FinishedAt from stoppedAt, console link. Event.At is the
// envelope's time, which has whole seconds only; a finished job's stoppedAt
// is used instead, and so are a running job's startedAt and a job back in
// RUNNABLE its last attempt's stoppedAt when they fall within a second of
// it (they are the moment of that change, to the millisecond).
//
// The children of an array job (job IDs PARENT:INDEX) and the nodes of a
// multi-node parallel job (PARENT#NODE) send events of their own; no task
// holds their IDs, so they give no event: the parent's own events (and,
// between them, its polls at poll_interval) report the job, and its child
// counts.
func (a *Adapter) ReadEvents(_ context.Context, d adapters.Delivery) ([]adapters.Event, error) {
	ev := a.events
	if ev == nil {
		return nil, fmt.Errorf("AWS Batch backend %q has no events block: %w", a.name, adapters.ErrForgedEvent)
	}
	got := d.Header.Values(ev.header)
	switch {
	case len(got) == 0:
		return nil, fmt.Errorf("AWS Batch event: no %s header: %w", ev.header, adapters.ErrForgedEvent)
	case len(got) > 1:
		return nil, fmt.Errorf("AWS Batch event: %d %s headers: %w", len(got), ev.header, adapters.ErrForgedEvent)
	}
	key, err := ev.keys.Value(ev.key)
	if err != nil {
		// Only a key file that vanished before any was read: a wiring
		// mistake New rules out.
		return nil, fmt.Errorf("AWS Batch event: %w", err)
	}
	if !sameKey(got[0], key) {
		return nil, fmt.Errorf("AWS Batch event: the %s header does not carry the configured API key: %w", ev.header, adapters.ErrForgedEvent)
	}

	var env envelope
	if err := json.Unmarshal(d.Body, &env); err != nil {
		return nil, fmt.Errorf("AWS Batch event: the body is not an EventBridge event (is an input transformer reshaping it?): %w", err)
	}
	if env.Source != eventSource || env.DetailType != eventDetailType {
		return nil, nil
	}
	if env.ID == "" {
		return nil, errors.New("AWS Batch event: the envelope has no id")
	}
	sent, err := time.Parse(time.RFC3339, env.Time)
	if err != nil {
		return nil, fmt.Errorf("AWS Batch event %s: the envelope's time %q is not an RFC 3339 time", env.ID, env.Time)
	}
	received := d.ReceivedAt
	if received.IsZero() {
		received = a.now()
	}
	if age := received.Sub(sent); age > ev.maxAge {
		return nil, fmt.Errorf("AWS Batch event %s: sent at %s, %v before it arrived, longer than max_age %v: %w",
			env.ID, sent.UTC().Format(time.RFC3339), age.Round(time.Second), ev.maxAge, adapters.ErrReplayedEvent)
	}
	if len(env.Detail) == 0 || string(env.Detail) == "null" {
		return nil, fmt.Errorf("AWS Batch event %s: the envelope has no detail", env.ID)
	}
	var j types.JobDetail
	if err := json.Unmarshal(env.Detail, &j); err != nil {
		return nil, fmt.Errorf("AWS Batch event %s: the detail is not a Batch job description: %w", env.ID, err)
	}
	id := aws.ToString(j.JobId)
	switch {
	case id == "":
		return nil, fmt.Errorf("AWS Batch event %s: the detail has no jobId", env.ID)
	case j.Status == "":
		return nil, fmt.Errorf("AWS Batch event %s: the detail of job %s has no status", env.ID, id)
	case strings.ContainsAny(id, ":#"):
		return nil, nil // an array child or a node of a multi-node job
	}
	if known := a.poller.known(id); known != nil && known.Status != j.Status {
		// The poller's description is older than the event: the next poll
		// describes the job afresh instead of answering from it.
		a.poller.invalidate(id)
	}
	return []adapters.Event{{
		ID:          env.ID,
		JobID:       id,
		At:          eventAt(sent, &j),
		Observation: a.observe(description{detail: &j}),
	}}, nil
}

// eventAt is when the job reached the state an event reports; see
// [Adapter.ReadEvents].
func eventAt(sent time.Time, j *types.JobDetail) time.Time {
	var ms int64
	switch j.Status {
	case types.JobStatusSucceeded, types.JobStatusFailed:
		if ms := aws.ToInt64(j.StoppedAt); ms > 0 {
			return time.UnixMilli(ms).UTC()
		}
	case types.JobStatusRunning:
		ms = aws.ToInt64(j.StartedAt)
	case types.JobStatusRunnable:
		if n := len(j.Attempts); n > 0 {
			ms = aws.ToInt64(j.Attempts[n-1].StoppedAt)
		}
	}
	if ms > 0 {
		if t := time.UnixMilli(ms).UTC(); t.After(sent.Add(-time.Second)) && t.Before(sent.Add(time.Second)) {
			return t
		}
	}
	return sent.UTC()
}
