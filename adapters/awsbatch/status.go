package awsbatch

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"github.com/jobbridge/jobbridge/adapters"
)

// observe translates a job description into an observation.
func (a *Adapter) observe(d description) adapters.Observation {
	j := d.detail
	o := adapters.Observation{State: adapters.StateWorking}
	if u := a.consoleURL(aws.ToString(j.JobId)); u != "" {
		o.Links = []adapters.Link{{Title: "AWS Batch console", URL: u}}
	}
	array := arrayOf(j)
	if array != nil {
		o.Progress = array.progress()
	}
	reason := aws.ToString(j.StatusReason)
	final := j.Status == types.JobStatusSucceeded || j.Status == types.JobStatusFailed
	stopping := a.cancelSent(aws.ToString(j.JobId), final)
	tries := attemptsOf(j)
	switch j.Status {
	case types.JobStatusSubmitted:
		o.Message = "submitted; waiting for the Batch scheduler"
	case types.JobStatusPending:
		switch {
		case stopping && len(j.DependsOn) > 0:
			// "A PENDING job is canceled after all dependency jobs are
			// completed."
			o.Message = "pending: cancel requested; Batch cancels a job that waits for other jobs only once the jobs it depends on have finished, so it stays pending until then"
		case array != nil:
			o.Message = "array job: " + array.text()
		case len(j.DependsOn) > 0:
			o.Message = "pending: waiting for the jobs it depends on"
		default:
			o.Message = "pending"
		}
		if stopping && array != nil {
			o.Message += "; cancel requested: the array job is cancelled once its children have stopped"
		}
	case types.JobStatusRunnable:
		o.Message = "runnable: waiting for capacity in queue " + queueName(aws.ToString(j.JobQueue))
		if d.position > 0 {
			o.Message += fmt.Sprintf(" (position %d)", d.position)
		}
		if reason != "" {
			o.Message += "; " + reason
		}
		if n := len(j.Attempts); n > 0 {
			o.Message += "; retrying: " + tries.failed(j.Attempts[n-1], n)
		}
	case types.JobStatusStarting:
		o.Message = "starting: placing the container and pulling its image"
		if n := len(j.Attempts); n > 0 {
			o.Message += " (" + tries.attempt(n+1) + "; " + tries.failed(j.Attempts[n-1], n) + ")"
		}
	case types.JobStatusRunning:
		o.Message = "running"
		n := len(j.Attempts)
		// startedAt is the first attempt's start, or the current one's:
		// count only a start after the last failed attempt stopped.
		started := aws.ToInt64(j.StartedAt)
		if started > 0 && (n == 0 || started >= aws.ToInt64(j.Attempts[n-1].StoppedAt)) {
			if run := a.now().Sub(time.UnixMilli(started)); run >= time.Second {
				o.Message += " for " + run.Round(time.Second).String()
			}
		}
		if n > 0 {
			o.Message += " (" + tries.attempt(n+1) + "; " + tries.failed(j.Attempts[n-1], n) + ")"
		} else if tries > 1 {
			o.Message += " (" + tries.attempt(1) + ")"
		}
	}
	if stopping && (j.Status == types.JobStatusStarting || j.Status == types.JobStatusRunning) {
		o.Message += "; cancel requested: Batch sent the container SIGTERM and stops it once it exits or its stop timeout (30s by default) has passed"
	}
	switch j.Status {
	case types.JobStatusSucceeded:
		o.FinishedAt = stoppedAt(j)
		o.State = adapters.StateSucceeded
		o.Message = "succeeded"
		o.Result = a.result(j, array)
	case types.JobStatusFailed:
		o.FinishedAt = stoppedAt(j)
		o.Result = a.result(j, array)
		if aws.ToBool(j.IsCancelled) || aws.ToBool(j.IsTerminated) || strings.HasPrefix(reason, cancelPrefix) {
			o.State = adapters.StateCancelled
			o.Message = reason
			if o.Message == "" {
				o.Message = "terminated"
			}
			break
		}
		o.State = adapters.StateToolError
		o.Message = "failed"
		if reason != "" {
			o.Message += ": " + reason
		}
		if code, ok := exitCode(j); ok {
			o.Message += fmt.Sprintf(" (exit code %d)", code)
		}
		if n := len(j.Attempts); n > 1 {
			o.Message += fmt.Sprintf(" after %d attempts", n)
		}
	case types.JobStatusSubmitted, types.JobStatusPending, types.JobStatusRunnable, types.JobStatusStarting, types.JobStatusRunning:
		// Described above.
	default:
		// A status this adapter does not know yet (such as a new Batch
		// state): keep the task working and say what Batch said.
		o.Message = "status " + string(j.Status)
		if reason != "" {
			o.Message += ": " + reason
		}
	}
	return o
}

// attempts is how many attempts a job gets in all (retryStrategy.attempts),
// or 0 when Batch does not say.
type attempts int

func attemptsOf(j *types.JobDetail) attempts {
	if j.RetryStrategy != nil {
		return attempts(aws.ToInt32(j.RetryStrategy.Attempts))
	}
	return 0
}

// attempt names attempt n, e.g. "attempt 2 of 3".
func (t attempts) attempt(n int) string {
	if int(t) >= n {
		return fmt.Sprintf("attempt %d of %d", n, t)
	}
	return fmt.Sprintf("attempt %d", n)
}

// failed says how attempt n ended, e.g. "attempt 1 of 3 failed with exit
// code 1".
func (t attempts) failed(a types.AttemptDetail, n int) string {
	msg := t.attempt(n) + " failed"
	if c := a.Container; c != nil && c.ExitCode != nil {
		msg += fmt.Sprintf(" with exit code %d", *c.ExitCode)
	} else if r := aws.ToString(a.StatusReason); r != "" {
		msg += ": " + r
	}
	return msg
}

// stoppedAt is when Batch says the job stopped (stoppedAt, Unix
// milliseconds), or zero.
func stoppedAt(j *types.JobDetail) time.Time {
	if ms := aws.ToInt64(j.StoppedAt); ms > 0 {
		return time.UnixMilli(ms).UTC()
	}
	return time.Time{}
}

// result is the tool result of a finished job: a readable summary and the
// same facts as structured content.
func (a *Adapter) result(j *types.JobDetail, array *arrayStatus) *adapters.Result {
	id, name := aws.ToString(j.JobId), aws.ToString(j.JobName)
	s := map[string]any{
		"job_id":    id,
		"job_name":  name,
		"job_queue": aws.ToString(j.JobQueue),
		"status":    string(j.Status),
		"region":    a.region,
		"attempts":  len(j.Attempts),
	}
	var b strings.Builder
	fmt.Fprintf(&b, "AWS Batch job %s (%s) %s", name, id, j.Status)
	if r := aws.ToString(j.StatusReason); r != "" {
		s["status_reason"] = r
		fmt.Fprintf(&b, ": %s", r)
	}
	b.WriteString(".")
	if arn := aws.ToString(j.JobArn); arn != "" {
		s["job_arn"] = arn
	}
	if code, ok := exitCode(j); ok {
		s["exit_code"] = code
		fmt.Fprintf(&b, " Exit code %d", code)
		if n := len(j.Attempts); n > 0 {
			fmt.Fprintf(&b, " after %d %s", n, plural(n, "attempt", "attempts"))
		}
		b.WriteString(".")
	}
	if r := containerReason(j); r != "" {
		s["container_reason"] = r
	}
	if ls := logStream(j); ls != "" {
		s["log_stream"] = ls
		fmt.Fprintf(&b, " Log stream: %s.", ls)
	}
	for key, ms := range map[string]*int64{"created_at": j.CreatedAt, "started_at": j.StartedAt, "stopped_at": j.StoppedAt} {
		if v := aws.ToInt64(ms); v > 0 {
			s[key] = time.UnixMilli(v).UTC().Format(time.RFC3339Nano)
		}
	}
	if array != nil {
		summary := map[string]any{}
		for k, v := range array.summary {
			summary[k] = v
		}
		s["array"] = map[string]any{"size": array.size, "status_summary": summary}
		fmt.Fprintf(&b, " Array of %d children: %s.", array.size, array.counts())
	}
	if u := a.consoleURL(id); u != "" {
		s["console_url"] = u
		fmt.Fprintf(&b, " Console: %s", u)
	}
	return &adapters.Result{Text: b.String(), Structured: s}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// exitCode is the exit code of the job's container, or of its last attempt.
func exitCode(j *types.JobDetail) (int, bool) {
	if j.Container != nil && j.Container.ExitCode != nil {
		return int(*j.Container.ExitCode), true
	}
	if n := len(j.Attempts); n > 0 {
		if c := j.Attempts[n-1].Container; c != nil && c.ExitCode != nil {
			return int(*c.ExitCode), true
		}
	}
	return 0, false
}

func containerReason(j *types.JobDetail) string {
	if j.Container != nil && aws.ToString(j.Container.Reason) != "" {
		return aws.ToString(j.Container.Reason)
	}
	if n := len(j.Attempts); n > 0 && j.Attempts[n-1].Container != nil {
		return aws.ToString(j.Attempts[n-1].Container.Reason)
	}
	return ""
}

// logStream is the CloudWatch log stream of the job's container, or of its
// last attempt.
func logStream(j *types.JobDetail) string {
	if j.Container != nil && aws.ToString(j.Container.LogStreamName) != "" {
		return aws.ToString(j.Container.LogStreamName)
	}
	if n := len(j.Attempts); n > 0 && j.Attempts[n-1].Container != nil {
		return aws.ToString(j.Attempts[n-1].Container.LogStreamName)
	}
	return ""
}

// queueName shortens a queue ARN to the queue's name.
func queueName(q string) string {
	if _, name, ok := strings.Cut(q, ":job-queue/"); ok {
		return name
	}
	return q
}

// arrayStatus is an array parent's view of its children.
type arrayStatus struct {
	size    int
	summary map[string]int32
}

// arrayOf returns the array status of an array parent, or nil.
func arrayOf(j *types.JobDetail) *arrayStatus {
	p := j.ArrayProperties
	if p == nil || aws.ToInt32(p.Size) == 0 || p.Index != nil {
		return nil
	}
	return &arrayStatus{size: int(aws.ToInt32(p.Size)), summary: p.StatusSummary}
}

func (s *arrayStatus) count(st types.JobStatus) int { return int(s.summary[string(st)]) }

// progress counts finished children.
func (s *arrayStatus) progress() *adapters.Progress {
	done := s.count(types.JobStatusSucceeded) + s.count(types.JobStatusFailed)
	return &adapters.Progress{Done: float64(done), Total: float64(s.size)}
}

// text says how far the children have got, e.g. "37 of 100 children
// finished (35 succeeded, 2 failed), 10 running, 53 waiting".
func (s *arrayStatus) text() string {
	succeeded, failed := s.count(types.JobStatusSucceeded), s.count(types.JobStatusFailed)
	running := s.count(types.JobStatusRunning) + s.count(types.JobStatusStarting)
	waiting := s.size - succeeded - failed - running
	return fmt.Sprintf("%d of %d children finished (%d succeeded, %d failed), %d running, %d waiting",
		succeeded+failed, s.size, succeeded, failed, running, max(waiting, 0))
}

// counts is the final tally, e.g. "98 succeeded, 2 failed".
func (s *arrayStatus) counts() string {
	return fmt.Sprintf("%d succeeded, %d failed", s.count(types.JobStatusSucceeded), s.count(types.JobStatusFailed))
}
