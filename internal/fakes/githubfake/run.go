package githubfake

import (
	"fmt"
	"strings"
	"time"
)

// Run statuses and conclusions, as GitHub spells them.
const (
	statusPending    = "pending"
	statusQueued     = "queued"
	statusInProgress = "in_progress"
	statusWaiting    = "waiting"
	statusCompleted  = "completed"

	conclusionSuccess   = "success"
	conclusionFailure   = "failure"
	conclusionCancelled = "cancelled"
	conclusionSkipped   = "skipped"
)

// Cancel behaviours of a [Script].
const (
	// OnCancelCancel ends the run "cancelled" when it is cancelled.
	OnCancelCancel = "cancel"
	// OnCancelIgnore acknowledges a cancel and lets the run go on, as a run
	// with always() jobs does; only a force-cancel stops it.
	OnCancelIgnore = "ignore"
	// OnCancelFail ends the run with conclusion "failure" when it is
	// cancelled, as GitHub has been seen to report for runs cancelled in the
	// UI.
	OnCancelFail = "fail"
)

// Script is what a workflow run does. Durations are measured on the server's
// clock. The zero value is a run with one job, "build", that succeeds at once.
type Script struct {
	// RunName is the run's display_title, with {inputs.NAME} replaced by the
	// dispatch input NAME, as a workflow's `run-name:` does. Empty: the
	// workflow's name.
	RunName string
	// Pending is how long the run waits for its concurrency group (status
	// "pending") before it is queued.
	Pending time.Duration
	// Queued is how long the run waits for a runner (status "queued").
	Queued time.Duration
	// Jobs run one after the other. Empty: one job "build" of no duration.
	Jobs []JobScript
	// Approval, when set, gates one job behind an environment with required
	// reviewers: the run is "waiting" until a review arrives.
	Approval *Approval
	// Conclusion is the run's conclusion when every job has run: success
	// (default), failure, neutral, skipped, timed_out, startup_failure,
	// stale, action_required or cancelled.
	Conclusion string
	// OnCancel is OnCancelCancel (default), OnCancelIgnore or OnCancelFail.
	OnCancel string
	// Artifacts are listed once the run has completed.
	Artifacts []ArtifactScript
}

// JobScript is one job of a run.
type JobScript struct {
	Name     string
	Duration time.Duration
	// Conclusion of the job when it completes. Default: success, except that
	// the last job takes the run's conclusion when that is failure or
	// timed_out.
	Conclusion string
	// Log is the job's log text. Empty: LogLines generated lines.
	Log string
	// LogLines is how many lines a generated log has. Default 20.
	LogLines int
}

// Approval is an environment protection rule with required reviewers.
type Approval struct {
	// Job is the index of the job the environment gates (it waits before
	// that job starts).
	Job int
	// Environment is the environment's name, e.g. "production".
	Environment string
	// EnvironmentID is its ID. Default 1.
	EnvironmentID int64
	// Reviewers are logins of required reviewers; a name "team:SLUG" is a
	// team.
	Reviewers []string
	// CanApprove is pending_deployments' current_user_can_approve.
	CanApprove bool
}

// ArtifactScript is an artifact a run uploads.
type ArtifactScript struct {
	Name string
	Size int64
}

// Review is an answer to a pending deployment, as the server received it.
type Review struct {
	EnvironmentIDs []int64
	State          string
	Comment        string
	At             time.Time
}

// run is one workflow run. Its observable state is computed from the clock
// and the events recorded here.
type run struct {
	id         int64
	number     int
	attempt    int
	owner      string
	repo       string
	workflow   *Workflow
	ref        string
	inputs     map[string]string
	title      string
	script     Script
	createdAt  time.Time // of the current attempt
	firstAt    time.Time
	jobIDs     []int64
	artifactID int64
	// jobsQuiet: a job finishing does not move the run's updated_at
	// ([Options.JobsLeaveRunUnchanged]).
	jobsQuiet bool

	// review is the answer to the approval, if any.
	review *Review
	// cancelRequested is when a cancel was accepted.
	cancelRequested time.Time
	// end, when set, is how the run ended through a request (a cancel, a
	// force-cancel, a rejected deployment).
	end *ending
}

type ending struct {
	at         time.Time
	conclusion string
}

// jobState is a job's observable state.
type jobState struct {
	status      string
	conclusion  string
	startedAt   time.Time
	completedAt time.Time
}

// state is a run's observable state at one instant.
type state struct {
	status     string
	conclusion string
	updatedAt  time.Time
	startedAt  time.Time // zero until a job started
	jobs       []jobState
}

func (r *run) jobs() []JobScript {
	if len(r.script.Jobs) == 0 {
		return []JobScript{{Name: "build"}}
	}
	return r.script.Jobs
}

// jobConclusion is job i's conclusion when it runs to its end.
func (r *run) jobConclusion(i int) string {
	jobs := r.jobs()
	if c := jobs[i].Conclusion; c != "" {
		return c
	}
	if i == len(jobs)-1 {
		switch r.script.Conclusion {
		case conclusionFailure, "timed_out":
			return r.script.Conclusion
		}
	}
	return conclusionSuccess
}

func (r *run) conclusion() string {
	if r.script.Conclusion == "" {
		return conclusionSuccess
	}
	return r.script.Conclusion
}

// waitingFrom is when the run starts waiting for its approval, or zero when
// it has none.
func (r *run) waitingFrom() time.Time {
	a := r.script.Approval
	if a == nil {
		return time.Time{}
	}
	t := r.createdAt.Add(r.script.Pending + r.script.Queued)
	for i := 0; i < a.Job && i < len(r.jobs()); i++ {
		t = t.Add(r.jobs()[i].Duration)
	}
	return t
}

// stateAt computes the run's state at now.
func (r *run) stateAt(now time.Time) state {
	if r.end != nil && !now.Before(r.end.at) {
		st := r.natural(r.end.at)
		st.status, st.conclusion, st.updatedAt = statusCompleted, r.end.conclusion, r.end.at
		for i := range st.jobs {
			j := &st.jobs[i]
			switch j.status {
			case statusCompleted:
			case statusInProgress, statusWaiting:
				j.status, j.conclusion, j.completedAt = statusCompleted, r.end.conclusion, r.end.at
			default:
				j.status, j.conclusion, j.completedAt = statusCompleted, conclusionSkipped, r.end.at
			}
		}
		return st
	}
	return r.natural(now)
}

// natural is the run's state at now when nothing but time has acted on it
// (a review counts as time acting).
func (r *run) natural(now time.Time) state {
	jobs := r.jobs()
	st := state{jobs: make([]jobState, len(jobs)), updatedAt: r.createdAt}
	for i := range st.jobs {
		st.jobs[i].status = statusQueued
	}
	mark := func(t time.Time) {
		if t.After(st.updatedAt) {
			st.updatedAt = t
		}
	}
	t := r.createdAt
	if r.script.Pending > 0 {
		if now.Before(t.Add(r.script.Pending)) {
			st.status = statusPending
			return st
		}
		t = t.Add(r.script.Pending)
		mark(t)
	}
	if now.Before(t.Add(r.script.Queued)) {
		st.status = statusQueued
		return st
	}
	t = t.Add(r.script.Queued)
	mark(t)
	st.startedAt = t
	for i, js := range jobs {
		if a := r.script.Approval; a != nil && a.Job == i {
			if r.review == nil || now.Before(r.review.At) {
				st.status = statusWaiting
				st.jobs[i].status = statusWaiting
				return st
			}
			t = r.review.At
			mark(t)
		}
		st.jobs[i].status, st.jobs[i].startedAt = statusInProgress, t
		end := t.Add(js.Duration)
		if now.Before(end) {
			st.status = statusInProgress
			return st
		}
		st.jobs[i].status, st.jobs[i].conclusion, st.jobs[i].completedAt = statusCompleted, r.jobConclusion(i), end
		t = end
		if !r.jobsQuiet || i == len(jobs)-1 {
			mark(t)
		}
	}
	st.status, st.conclusion = statusCompleted, r.conclusion()
	return st
}

// displayTitle renders the script's run name.
func displayTitle(tmpl, workflowName string, inputs map[string]string) string {
	if tmpl == "" {
		return workflowName
	}
	var b strings.Builder
	for {
		i := strings.Index(tmpl, "{inputs.")
		if i < 0 {
			b.WriteString(tmpl)
			return b.String()
		}
		j := strings.IndexByte(tmpl[i:], '}')
		if j < 0 {
			b.WriteString(tmpl)
			return b.String()
		}
		b.WriteString(tmpl[:i])
		b.WriteString(inputs[tmpl[i+len("{inputs."):i+j]])
		tmpl = tmpl[i+j+1:]
	}
}

// logText is job i's log.
func (r *run) logText(i int, st jobState) string {
	js := r.jobs()[i]
	if js.Log != "" {
		return js.Log
	}
	n := js.LogLines
	if n <= 0 {
		n = 20
	}
	var b strings.Builder
	ts := st.startedAt.UTC().Format(time.RFC3339Nano)
	for k := 1; k <= n; k++ {
		fmt.Fprintf(&b, "%s %s: step output line %d\n", ts, js.Name, k)
	}
	if st.status == statusCompleted && st.conclusion != conclusionSuccess {
		fmt.Fprintf(&b, "%s ##[error]Process completed with exit code 1.\n", ts)
	}
	return b.String()
}
