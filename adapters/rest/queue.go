package rest

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/jobbridge/jobbridge/adapters"
)

// pollQueued observes a submission that is still a queue item: it asks the
// queue until the answer names the job, then replaces the reference (in
// Observation.Ref) and observes the job itself. Until then the job is
// working, "queued at the backend"; after job_id.queue.timeout it fails,
// saying so, and the queue item is removed when the catalog says how.
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
		return adapters.Observation{State: adapters.StateFailed, Message: msg,
			Error: &adapters.JobError{Code: defaultErrorCode, Message: msg}}, nil
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
		return fail(a.answered(adapters.ProblemNotFound, adapters.ErrJobNotFound, resp, joinWords(words, "the queue item is gone")))
	case isRefused:
		msg := "the backend did not start the job: " + a.answered(statusClass(resp.StatusCode), nil, resp, words).Error()
		return adapters.Observation{State: adapters.StateFailed, Message: msg,
			Error: &adapters.JobError{Code: defaultErrorCode, Message: msg}}, nil
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
