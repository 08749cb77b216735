package batchfake

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Job statuses, as Batch spells them.
const (
	statusSubmitted = "SUBMITTED"
	statusPending   = "PENDING"
	statusRunnable  = "RUNNABLE"
	statusStarting  = "STARTING"
	statusRunning   = "RUNNING"
	statusSucceeded = "SUCCEEDED"
	statusFailed    = "FAILED"
)

// allStatuses lists the statuses in lifecycle order, as an array parent's
// statusSummary reports them.
var allStatuses = []string{statusSubmitted, statusPending, statusRunnable, statusStarting, statusRunning, statusSucceeded, statusFailed}

// Status reasons the fake reports, worded as Batch words them.
const (
	reasonExited     = "Essential container in task exited"
	reasonTimeout    = "Job attempt duration exceeded timeout"
	reasonDependency = "Dependent Job failed"
	reasonArrayChild = "Array Child Job failed"
)

// Exit codes of a container stopped by TerminateJob: 128 + SIGTERM when it
// exited within the grace, 128 + SIGKILL when the grace ran out.
const (
	exitTerminated = 143
	exitKilled     = 137
)

// defaultTerminateGrace is how long a container has to exit after the
// SIGTERM of a TerminateJob before it is killed: ECS's default stopTimeout.
const defaultTerminateGrace = 30 * time.Second

// scriptKey is the parameter (or tag) that carries a job's script.
const scriptKey = "jobbridge_script"

// script is a job's scripted lifecycle; see the package documentation.
type script struct {
	submitted, pending, runnable, starting, running time.Duration
	runnableReason                                  string
	exit                                            int
	hidden, terminateDelay, stagger                 time.Duration
	terminateDelaySet                               bool // else the container ignores SIGTERM
	failChildren                                    int
}

func defaultScript() script {
	return script{
		submitted: 500 * time.Millisecond,
		runnable:  time.Second,
		starting:  500 * time.Millisecond,
		running:   3 * time.Second,
	}
}

// maxScriptDuration bounds each duration of a script (a day), so that job
// timelines stay far from time.Time's limits.
const maxScriptDuration = 24 * time.Hour

// parseScript reads comma-separated key=value directives over the defaults.
func parseScript(s string) (script, error) {
	sc := defaultScript()
	durations := map[string]*time.Duration{
		"submitted":       &sc.submitted,
		"pending":         &sc.pending,
		"runnable":        &sc.runnable,
		"starting":        &sc.starting,
		"running":         &sc.running,
		"hidden":          &sc.hidden,
		"terminate_delay": &sc.terminateDelay,
		"stagger":         &sc.stagger,
	}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, val, ok := strings.Cut(item, "=")
		if !ok {
			return script{}, fmt.Errorf("%s: %q is not key=value", scriptKey, item)
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if d, ok := durations[key]; ok {
			v, err := time.ParseDuration(val)
			if err != nil || v < 0 || v > maxScriptDuration {
				return script{}, fmt.Errorf("%s: %s=%q is not a duration between 0s and 24h", scriptKey, key, val)
			}
			*d = v
			sc.terminateDelaySet = sc.terminateDelaySet || key == "terminate_delay"
			continue
		}
		switch key {
		case "runnable_reason":
			sc.runnableReason = val
		case "exit", "fail_children":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 || n > 255 && key == "exit" || n > maxArraySize {
				return script{}, fmt.Errorf("%s: %s=%q is out of range", scriptKey, key, val)
			}
			if key == "exit" {
				sc.exit = n
			} else {
				sc.failChildren = n
			}
		default:
			return script{}, fmt.Errorf("%s: unknown directive %q", scriptKey, key)
		}
	}
	return sc, nil
}

// job is one submitted job, an array parent or an array child. Its state is
// computed from its creation time, script and stop request whenever asked.
type job struct {
	seq           int
	id, name, arn string
	queueName     string
	queueARN      string
	definition    string // as submitted
	definitionARN string
	created       time.Time
	script        script
	grace         time.Duration // how long a terminated container has after SIGTERM

	parameters    map[string]string
	tags          map[string]string
	propagateTags *bool
	shareID       *string
	priority      *int32
	command       []string
	environment   []keyValue
	resources     []resourceRequirement
	dependsOn     []dependency
	deps          []*job
	attempts      int // retryStrategy.attempts, at least 1
	timeout       int // attemptDurationSeconds, 0 for none

	size     int // array size; 0 for a job that is not an array parent
	parent   *job
	index    int
	children []*job

	stop *stopRequest
	ev   eventState // guarded by the server's mu
}

// stopRequest is the first TerminateJob or CancelJob that took effect.
type stopRequest struct {
	at     time.Time
	reason string
}

// plan is a job's natural timeline: what happens when nobody stops it.
type plan struct {
	submittedEnd time.Time // SUBMITTED before this
	depsEnd      time.Time // when the last dependency finished; zero without any
	readyAt      time.Time // PENDING before this
	depFailed    bool      // a dependency failed: FAILED from readyAt
	attempts     []attemptPlan
	end          time.Time
	status       string
	reason       string
}

// attemptPlan is one attempt: RUNNABLE from runnableAt (waiting for
// capacity, again after a failed attempt with attempts left), STARTING from
// startingAt, RUNNING from start until end.
type attemptPlan struct {
	runnableAt, startingAt, start, end time.Time
	exit                               *int
	timedOut                           bool
}

// state is what a job looks like at one moment.
type state struct {
	status     string
	reason     string
	startedAt  time.Time // zero until STARTING ended
	stoppedAt  time.Time // zero until finished
	attempts   []attemptState
	current    *attemptState // the attempt running now, if any
	cancelled  bool
	terminated bool
	summary    map[string]int32 // array parents only
}

type attemptState struct {
	start, stop time.Time
	exit        *int
	reason      string
	logStream   string
}

func (s state) finished() bool { return s.status == statusSucceeded || s.status == statusFailed }

// exitCode is the exit code of this job's attempts.
func (j *job) exitCode() int {
	if j.parent == nil || j.parent.script.failChildren == 0 {
		return j.script.exit
	}
	if j.index < j.parent.script.failChildren {
		return max(j.script.exit, 1)
	}
	return 0
}

// plan computes the job's natural timeline. Array parents have none of their
// own; see at. An array child waits for its parent's dependencies.
func (j *job) plan() plan {
	sc := j.script
	var p plan
	deps := j.deps
	if j.parent != nil {
		p.submittedEnd = j.parent.created.Add(j.parent.script.submitted)
		deps = j.parent.deps
	} else {
		p.submittedEnd = j.created.Add(sc.submitted)
	}
	for _, d := range deps {
		end, st := d.final()
		if end.After(p.depsEnd) {
			p.depsEnd = end
		}
		if st.status == statusFailed {
			p.depFailed = true
		}
	}
	p.readyAt = p.submittedEnd.Add(sc.pending)
	if p.depsEnd.After(p.readyAt) {
		p.readyAt = p.depsEnd
	}
	if p.depFailed {
		p.end, p.status, p.reason = p.readyAt, statusFailed, reasonDependency
		return p
	}
	t := p.readyAt
	exit := j.exitCode()
	for i := range j.attempts {
		a := attemptPlan{runnableAt: t}
		wait := sc.runnable
		if i == 0 {
			wait += time.Duration(j.index) * sc.stagger
		}
		a.startingAt = t.Add(wait)
		a.start = a.startingAt.Add(sc.starting)
		d := sc.running
		if limit := time.Duration(j.timeout) * time.Second; j.timeout > 0 && d > limit {
			d, a.timedOut = limit, true
		} else {
			a.exit = &exit
		}
		a.end = a.start.Add(d)
		t = a.end
		p.attempts = append(p.attempts, a)
		p.status, p.reason = statusFailed, reasonExited
		if a.timedOut {
			p.reason = reasonTimeout
			break
		}
		if exit == 0 {
			p.status = statusSucceeded
			break
		}
	}
	p.end = t
	return p
}

// attemptAt is the index of the attempt under way at t (RUNNABLE, STARTING
// or RUNNING for it), or -1.
func (p plan) attemptAt(t time.Time) int {
	if t.Before(p.readyAt) {
		return -1
	}
	for i, a := range p.attempts {
		if t.Before(a.end) {
			return i
		}
	}
	return -1
}

// naturalStatus is the status the plan gives at t.
func (j *job) naturalStatus(p plan, t time.Time) string {
	switch {
	case t.Before(p.submittedEnd):
		if j.parent != nil {
			return statusPending
		}
		return statusSubmitted
	case t.Before(p.readyAt):
		return statusPending
	case p.depFailed:
		return statusFailed
	}
	if i := p.attemptAt(t); i >= 0 {
		switch a := p.attempts[i]; {
		case t.Before(a.startingAt):
			return statusRunnable
		case t.Before(a.start):
			return statusStarting
		}
		return statusRunning
	}
	return p.status
}

// farFuture is a moment after every job has finished.
func (j *job) farFuture() time.Time { return j.created.Add(100 * 365 * 24 * time.Hour) }

// final returns when and how the job ends, as far as is known now.
func (j *job) final() (time.Time, state) {
	st := j.at(j.farFuture())
	return st.stoppedAt, st
}

// at computes the job's state at now.
//
// A stop request (TerminateJob or CancelJob) cancels a SUBMITTED or RUNNABLE
// job at once, and a PENDING one once its dependencies have finished, as
// Batch does ("a PENDING job is canceled after all dependency jobs are
// completed"). A STARTING or RUNNING job gets SIGTERM and stays RUNNING
// until its container exits (the script's terminate_delay, exit code 143)
// or the grace ends ([Options.TerminateGrace], exit code 137); a
// terminated job is not retried.
func (j *job) at(now time.Time) state {
	if j.size > 0 {
		return j.parentAt(now)
	}
	p := j.plan()
	end, status, reason := p.end, p.status, p.reason
	var cut time.Time // the moment a stop cuts the running attempt short
	cutExit := exitKilled
	var cancelled, terminated bool
	if s := j.stop; s != nil {
		switch j.naturalStatus(p, s.at) {
		case statusPending:
			at := s.at
			if p.depsEnd.After(at) {
				at = p.depsEnd
			}
			end, status, reason, cancelled = at, statusFailed, s.reason, true
		case statusSubmitted, statusRunnable:
			end, status, reason, cancelled = s.at, statusFailed, s.reason, true
		case statusStarting, statusRunning:
			a := p.attempts[p.attemptAt(s.at)]
			delay := j.grace
			if j.script.terminateDelaySet && j.script.terminateDelay < delay {
				delay, cutExit = j.script.terminateDelay, exitTerminated
			}
			switch e := s.at.Add(delay); {
			case e.Before(a.end):
				end, status, reason, terminated, cut = e, statusFailed, s.reason, true, e
			case a.end.Before(p.end):
				// The attempt ended on its own within the grace; a
				// terminated job gets no further attempt.
				end, status, reason, terminated = a.end, statusFailed, s.reason, true
			}
		}
	}

	var st state
	if !now.Before(end) {
		st.status, st.reason, st.stoppedAt = status, reason, end
		st.cancelled, st.terminated = cancelled, terminated
	} else {
		st.status = j.naturalStatus(p, now)
		if st.status == statusRunnable {
			st.reason = j.script.runnableReason
		}
	}
	if len(p.attempts) > 0 {
		if first := p.attempts[0].start; !now.Before(first) && first.Before(end) {
			st.startedAt = first
		}
	}
	for i, a := range p.attempts {
		if !a.start.Before(end) || a.start.After(now) {
			break
		}
		as := attemptState{start: a.start, stop: a.end, exit: a.exit, logStream: j.logStream(i)}
		if a.timedOut {
			as.reason = reasonTimeout
		}
		if !cut.IsZero() && a.end.After(cut) {
			code := cutExit
			as.stop, as.exit, as.reason = cut, &code, "Task stopped: "+reason
		}
		if now.Before(as.stop) {
			st.current = &as
			break
		}
		st.attempts = append(st.attempts, as)
	}
	return st
}

// runnableSince is when the job last became RUNNABLE, for a job RUNNABLE
// at now.
func (j *job) runnableSince(now time.Time) time.Time {
	p := j.plan()
	if i := p.attemptAt(now); i >= 0 {
		return p.attempts[i].runnableAt
	}
	return p.readyAt
}

// parentAt computes an array parent's state from its children's.
func (j *job) parentAt(now time.Time) state {
	subEnd := j.created.Add(j.script.submitted)
	if s := j.stop; s != nil && s.at.Before(subEnd) {
		if now.Before(s.at) {
			return state{status: statusSubmitted, summary: map[string]int32{}}
		}
		return state{status: statusFailed, reason: s.reason, stoppedAt: s.at, cancelled: true, summary: map[string]int32{}}
	}
	if now.Before(subEnd) {
		return state{status: statusSubmitted, summary: map[string]int32{}}
	}
	st := state{status: statusPending, startedAt: subEnd, summary: map[string]int32{}}
	for _, s := range allStatuses {
		st.summary[s] = 0
	}
	done, failed := true, false
	var end time.Time
	for _, c := range j.children {
		cs := c.at(now)
		st.summary[cs.status]++
		if !cs.finished() {
			done = false
			continue
		}
		failed = failed || cs.status == statusFailed
		if cs.stoppedAt.After(end) {
			end = cs.stoppedAt
		}
	}
	if !done {
		return st
	}
	st.stoppedAt = end
	switch {
	case j.stop != nil:
		st.status, st.reason, st.cancelled = statusFailed, j.stop.reason, true
	case failed:
		st.status, st.reason = statusFailed, reasonArrayChild
	default:
		st.status, st.reason = statusSucceeded, reasonExited
	}
	return st
}

// logStream names the CloudWatch log stream of attempt i, as Batch does:
// <job definition name>/default/<task ID>.
func (j *job) logStream(i int) string {
	name, _, _ := strings.Cut(definitionName(j.definition), ":")
	return fmt.Sprintf("%s/default/%08x%08x%016x", name, j.seq, j.index, i+1)
}

// requestStop records a TerminateJob (terminate) or CancelJob at now, unless
// the job has finished, already has a stop, or (for CancelJob) has started.
// An array parent passes it on to its children.
func (j *job) requestStop(now time.Time, reason string, terminate bool) {
	if j.stop != nil {
		return
	}
	st := j.at(now)
	if st.finished() {
		return
	}
	switch st.status {
	case statusStarting, statusRunning:
		if !terminate {
			return
		}
	}
	j.stop = &stopRequest{at: now, reason: reason}
	for _, c := range j.children {
		c.requestStop(now, reason, terminate)
	}
}

// visible reports whether DescribeJobs and ListJobs show the job at now.
func (j *job) visible(now time.Time) bool {
	root := j
	if j.parent != nil {
		root = j.parent
	}
	return !now.Before(root.created.Add(root.script.hidden))
}

// definitionName strips an ARN down to name[:revision].
func definitionName(def string) string {
	if _, after, ok := strings.Cut(def, ":job-definition/"); ok {
		return after
	}
	return def
}
