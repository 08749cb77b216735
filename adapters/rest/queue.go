package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/jobbridge/jobbridge/adapters"
)

// pollQueued observes a submission that is still a queue item: it asks the
// queue until the answer names the job, then replaces the reference (in
// Observation.Ref) and observes the job itself. Until then the job is
// working, "queued at the backend".
//
// A queued request that will never become a job is reported in
// Observation.Err as an [adapters.CallError] wrapping
// [adapters.ErrNeverStarted], with the call and the backend's words, so
// that the task ends cancelled when it asked to cancel, else completed
// with isError saying the job was never started (never failed: nothing
// went wrong in the bridge):
//   - an answer an outcome rule reads as `cancelled` (the request was
//     cancelled in the queue, by the task's cancel or at the backend) or
//     `refused` (the backend will not run it);
//   - a queue item that is gone (404 or 410, or a `not_found` rule): no job
//     was ever named. This error wraps [adapters.ErrJobNotFound] too, so the
//     bridge waits the tool's missing_grace before it concludes;
//   - a request still queued after job_id.queue.timeout; the queue item is
//     then removed when the catalog says how.
func (a *Adapter) pollQueued(ctx context.Context, t *tool, ref adapters.JobRef, v *values, retries int, giveUp *atomic.Bool) (adapters.Observation, error) {
	q := t.queue
	fail := func(err error) (adapters.Observation, error) {
		return adapters.Observation{Err: err}, nil
	}
	if v.queuedAt != nil && a.now().Sub(*v.queuedAt) > q.timeout {
		msg := fmt.Sprintf("the job was still queued at the backend %s after its submission (job_id.queue.timeout), so it never started (queue item %s)", q.timeout, ref.ID)
		if q.cancel != nil {
			if err := a.Cancel(ctx, ref); err != nil {
				msg += "; removing it from the queue failed: " + a.redactor.Clean(err.Error(), maxAPIText)
			} else {
				msg += "; it was removed from the queue"
			}
		}
		return fail(&adapters.CallError{Class: adapters.ProblemError, Message: msg, Err: adapters.ErrNeverStarted})
	}
	resp, body, err := a.sendSafe(ctx, q.call, v, retries, giveUp)
	if err != nil {
		return fail(err)
	}
	ans := answerOf(v, resp.StatusCode, resp.Header, body)
	switch is, words := a.classify(ctx, q.call, resp, body, ans); is {
	case isRetryLater:
		return adapters.Observation{}, a.throttle(resp, words)
	case isNotFound:
		// The queue item is gone and no job was ever named: dropped. Not
		// found (the bridge allows the tool's missing_grace, as for any
		// missing job), and never started once that has passed. But a
		// backend forgets items that left its queue (Jenkins after five
		// minutes): with a find call, the job is looked for first, so that
		// a job that did start while nobody asked is not called never
		// started.
		if job, ok := a.findStarted(ctx, t, v); ok {
			o, err := a.poll(ctx, job, retries, giveUp)
			o.Ref = &job
			return o, err
		}
		return fail(a.answered(adapters.ProblemNotFound, errNeverNamed, resp,
			joinWords(words, "the queue item is gone and no job was ever named for it")))
	case isCancelled:
		return fail(a.answered(adapters.ProblemError, adapters.ErrNeverStarted, resp,
			a.ruleWords(resp, body, words, "the queued request was cancelled")))
	case isRefused:
		return fail(a.answered(statusClass(resp.StatusCode), adapters.ErrNeverStarted, resp,
			a.ruleWords(resp, body, words, "the backend will not run the queued request")))
	case isSuccess:
	default:
		return fail(a.answered(statusClass(resp.StatusCode), nil, resp, words))
	}
	val, present, err := q.field.Read(ctx, ans)
	if err != nil {
		return fail(a.answered(adapters.ProblemUnreadable, adapters.ErrUnreadableStatus, resp,
			fmt.Sprintf("reading job_id.queue.field %s failed: %v (answer: %s)", q.field, a.redactor.Redact(err.Error()), a.excerpt(body))))
	}
	if !present {
		msg := "queued at the backend"
		if m, ok, err := q.message.Read(ctx, ans); err == nil && ok {
			if s, _ := scalarText(m); s != "" {
				msg += ": " + s
			}
		}
		a.traceText(q.call, "rule", fmt.Sprintf("job_id.queue.field %s is absent → still queued", q.field))
		return adapters.Observation{State: adapters.StateWorking, Message: a.redactor.Clean(msg, maxMessage)}, nil
	}
	id, kind := scalarText(val)
	if kind == "" && id == "" {
		kind = "empty"
	}
	if kind != "" {
		return fail(a.answered(adapters.ProblemUnreadable, adapters.ErrUnreadableStatus, resp,
			fmt.Sprintf("the job ID at job_id.queue.field %s is %s, not a string or number (answer: %s)", q.field, kind, a.excerpt(body))))
	}
	a.traceText(q.call, "rule", fmt.Sprintf("job_id.queue.field %s → job ID %q", q.field, a.redactor.Redact(id)))
	if err := a.checkJobID(id); err != nil {
		return fail(reasonf(adapters.ErrUnreadableStatus, "the queue names a job that cannot be addressed: %v", err))
	}
	data := refData{Tool: t.name, Location: v.location}
	job := t.ref(id, data, v.args, v.correlationID)
	if err := a.checkAddressable(t, job); err != nil {
		return fail(reasonf(adapters.ErrUnreadableStatus, "the queue names a job that cannot be addressed: %v", err))
	}
	o, err := a.poll(ctx, job, retries, giveUp)
	o.Ref = &job
	return o, err
}

// errNeverNamed is the cause of a queue item that is gone before it named a
// job: the backend does not report it (missing_grace applies), and it will
// never start.
var errNeverNamed = errors.Join(adapters.ErrJobNotFound, adapters.ErrNeverStarted)

// ruleWords are the words for a queued request the backend will not run,
// read from a successful answer: the outcome rule's message when it has
// one, else what, saying it in place of the whole queue item. From an
// unwelcome answer (not 2xx) they are the backend's words as usual.
func (a *Adapter) ruleWords(resp *http.Response, body []byte, words, what string) string {
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	if words == "" || ok && words == a.words(resp, body) {
		return what
	}
	return words
}

// findStarted looks up, with the tool's find call, the job of a queue item
// that is gone. ok is false when the tool has no find call, or the lookup
// found nothing or failed (the queue item is then reported gone; the next
// poll looks again).
func (a *Adapter) findStarted(ctx context.Context, t *tool, v *values) (adapters.JobRef, bool) {
	if t.find == nil || v.correlationID == "" {
		return adapters.JobRef{}, false
	}
	req := adapters.StartRequest{Tool: t.name, Arguments: v.args, CorrelationID: v.correlationID}
	if v.queuedAt != nil {
		req.SubmittedAt = *v.queuedAt
	}
	job, found, err := a.Find(ctx, req)
	if err != nil || !found {
		a.traceText(t.find, "rule", "the queue item is gone; find names no job for its correlation ID")
		return adapters.JobRef{}, false
	}
	a.traceText(t.find, "rule", fmt.Sprintf("the queue item is gone; find names job %q", a.redactor.Redact(job.ID)))
	return job, true
}
