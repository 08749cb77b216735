package githubactions

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-github/v93/github"

	"github.com/jobbridge/jobbridge/adapters"
)

// Limits on what a result carries.
const (
	maxMessage     = 1000
	maxFailedLogs  = 3       // failed jobs whose log tails a result carries
	maxLogBytes    = 8 << 20 // read at most this much of one log
	maxLogLine     = 2000    // longer log lines are cut
	perPage        = 100     // GitHub's largest page
	maxListPages   = 20      // pages of jobs or artifacts one observation reads
	approvalPrefix = "deployment"
)

// approvalSchema is the elicitation of a deployment review.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"decision":{"type":"string","title":"Decision","enum":["approve","reject"],"description":"Approve or reject the deployment."},` +
	`"comment":{"type":"string","title":"Comment","description":"Recorded with the review on GitHub."}},` +
	`"required":["decision"]}`)

// build turns a changed run into an observation, asking for the jobs,
// pending deployments, artifacts and logs it needs.
func (a *Adapter) build(ctx context.Context, t *tool, d refData, run *github.WorkflowRun) (adapters.Observation, error) {
	f, err := a.facts(ctx, t, d, run)
	if err != nil {
		return adapters.Observation{}, err
	}
	return a.runObservation(t, d, run, f), nil
}

// runFacts is what an observation of a run reads besides the run itself.
// The zero value is a run known from a webhook alone, which carries
// nothing else.
type runFacts struct {
	// read is whether the facts below were asked for; the rest is
	// meaningful only then.
	read bool
	// jobs of the latest attempt: read for a run in progress or completed.
	jobs []*github.WorkflowJob
	// pending deployments: read for a waiting run.
	pending []*github.PendingDeployment
	// artifacts and the log tails of failed jobs: read for a completed run.
	artifacts []*github.Artifact
	tails     []logTail
	// moreFailed counts the failed jobs beyond maxFailedLogs whose logs
	// were left out.
	moreFailed int
}

// logTail is the end of one failed job's log, or why it is not available.
type logTail struct {
	job, text, err string
}

// facts asks GitHub for what the observation of a run in its status needs.
func (a *Adapter) facts(ctx context.Context, t *tool, d refData, run *github.WorkflowRun) (runFacts, error) {
	f := runFacts{read: true}
	var err error
	switch run.GetStatus() {
	case "completed":
		if f.jobs, err = a.jobs(ctx, d); err != nil {
			return f, err
		}
		if f.artifacts, err = a.artifacts(ctx, d); err != nil {
			return f, err
		}
		if st, _ := conclusionState(run.GetConclusion()); st != adapters.StateToolError || *t.cfg.LogTailLines <= 0 {
			break
		}
		for i, j := range failedJobs(f.jobs) {
			if i == maxFailedLogs {
				f.moreFailed = len(failedJobs(f.jobs)) - maxFailedLogs
				break
			}
			lt := logTail{job: j.GetName()}
			if lt.text, err = a.logTail(ctx, d, j.GetID(), *t.cfg.LogTailLines); err != nil {
				lt.err = a.errText(err)
			}
			f.tails = append(f.tails, lt)
		}
	case "waiting":
		if f.pending, _, err = a.gh.Actions.GetPendingDeployments(ctx, d.Owner, d.Repo, d.RunID); err != nil {
			return f, a.apiError(err)
		}
	case "in_progress":
		if f.jobs, err = a.jobs(ctx, d); err != nil {
			return f, err
		}
	}
	return f, nil
}

// failedJobs are the jobs whose log tails a failed run's result carries.
func failedJobs(jobs []*github.WorkflowJob) []*github.WorkflowJob {
	var failed []*github.WorkflowJob
	for _, j := range jobs {
		switch j.GetConclusion() {
		case "failure", "timed_out", "startup_failure":
			failed = append(failed, j)
		}
	}
	return failed
}

// runObservation maps a run, and what else was read about it, onto an
// observation. It asks GitHub nothing: a poll and a webhook's workflow_run
// event both go through it, so that a run reads the same either way.
func (a *Adapter) runObservation(t *tool, d refData, run *github.WorkflowRun, f runFacts) adapters.Observation {
	status := run.GetStatus()
	o := adapters.Observation{}
	if u := run.GetHTMLURL(); u != "" {
		o.Links = []adapters.Link{{Title: "Workflow run", URL: u}}
	}
	switch status {
	case "completed":
		return a.completed(t, d, run, f, o)
	case "waiting":
		return a.waiting(t, run, f, o)
	case "requested", "queued":
		o.State = adapters.StateWorking
		o.Message = status + ": waiting for a runner"
	case "pending":
		o.State = adapters.StateWorking
		o.Message = "pending: waiting for its concurrency group"
	case "in_progress":
		o.State = adapters.StateWorking
		o.Message = "in_progress"
		done, current := 0, ""
		for _, j := range f.jobs {
			switch {
			case j.GetStatus() == "completed":
				done++
			case current == "" && j.GetStatus() == "in_progress":
				current = j.GetName()
			}
		}
		if current != "" {
			o.Message += ": job " + a.red.Clean(current, 200)
		}
		if len(f.jobs) > 0 {
			o.Message += fmt.Sprintf(" (%d of %d jobs done)", done, len(f.jobs))
			o.Progress = &adapters.Progress{Done: float64(done), Total: float64(len(f.jobs))}
		}
	default:
		a.log.Warn("unknown workflow run status; keeping the task working", "run", d.RunID, "status", a.red.Clean(status, 50))
		o.State = adapters.StateWorking
		o.Message = fmt.Sprintf("status %q", status)
	}
	o.Message = a.red.Clean(o.Message, maxMessage)
	return o
}

// waiting observes a run held by an environment protection rule.
func (a *Adapter) waiting(t *tool, run *github.WorkflowRun, f runFacts, o adapters.Observation) adapters.Observation {
	pending := f.pending
	o.State = adapters.StateWorking
	if len(pending) == 0 {
		o.Message = "waiting: for a deployment protection rule"
		return o
	}
	var envs, who []string
	var approvable []int64
	var approvableNames []string
	for _, p := range pending {
		env := p.GetEnvironment()
		envs = append(envs, env.GetName())
		for _, r := range p.Reviewers {
			who = append(who, reviewerName(r))
		}
		if p.GetCurrentUserCanApprove() && len(p.Reviewers) > 0 {
			approvable = append(approvable, env.GetID())
			approvableNames = append(approvableNames, env.GetName())
		}
		if p.GetWaitTimer() > 0 && len(p.Reviewers) == 0 {
			who = append(who, fmt.Sprintf("a wait timer of %d min", p.GetWaitTimer()))
		}
	}
	o.Message = a.red.Clean(waitingMessage(envs, who), maxMessage)
	if !t.cfg.Approvals || len(approvable) == 0 {
		return o
	}
	ids := make([]string, len(approvable))
	for i, id := range approvable {
		ids[i] = strconv.FormatInt(id, 10)
	}
	key := fmt.Sprintf("%s.%d.%s", approvalPrefix, max(run.GetRunAttempt(), 1), strings.Join(ids, "_"))
	msg := fmt.Sprintf("Approve the deployment of %s run #%d (%s) to %s?", run.GetName(), run.GetRunNumber(), run.GetDisplayTitle(), strings.Join(approvableNames, ", "))
	if u := run.GetHTMLURL(); u != "" {
		msg += " Run: " + u
	}
	o.State = adapters.StateInputRequired
	o.InputRequests = map[string]adapters.InputRequest{key: {Message: a.red.Clean(msg, maxMessage), Schema: approvalSchema}}
	return o
}

// waitingMessage is the status of a run whose deployment to the
// environments awaits approval by who (reviewers, wait timers; may be
// empty).
func waitingMessage(envs, who []string) string {
	msg := fmt.Sprintf("waiting: deployment to %s awaits approval", strings.Join(dedupe(envs), ", "))
	if len(who) > 0 {
		msg += " by " + strings.Join(dedupe(who), ", ")
	}
	return msg
}

func reviewerName(r *github.RequiredReviewer) string {
	switch v := r.Reviewer.(type) {
	case *github.User:
		return v.GetLogin()
	case *github.Team:
		return "team " + v.GetSlug()
	}
	return "a reviewer"
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// completed observes a finished run and builds its result.
func (a *Adapter) completed(t *tool, d refData, run *github.WorkflowRun, f runFacts, o adapters.Observation) adapters.Observation {
	conclusion := run.GetConclusion()
	var b strings.Builder
	fmt.Fprintf(&b, "Workflow run %d (%s #%d, attempt %d) of %s/%s concluded %s.\n",
		run.GetID(), run.GetName(), run.GetRunNumber(), max(run.GetRunAttempt(), 1), d.Owner, d.Repo, orNone(conclusion))
	if u := run.GetHTMLURL(); u != "" {
		fmt.Fprintf(&b, "Run: %s\n", u)
	}
	structured := map[string]any{
		"run_id":      run.GetID(),
		"run_number":  run.GetRunNumber(),
		"run_attempt": max(run.GetRunAttempt(), 1),
		"workflow":    run.GetName(),
		"title":       run.GetDisplayTitle(),
		"conclusion":  conclusion,
		"html_url":    run.GetHTMLURL(),
	}
	if f.read {
		jobList := []any{}
		if len(f.jobs) > 0 {
			b.WriteString("Jobs:\n")
		}
		for _, j := range f.jobs {
			fmt.Fprintf(&b, "- %s: %s\n", j.GetName(), orNone(j.GetConclusion()))
			jobList = append(jobList, map[string]any{"name": j.GetName(), "conclusion": j.GetConclusion(), "html_url": j.GetHTMLURL()})
		}
		structured["jobs"] = jobList
		artList := []any{}
		if len(f.artifacts) > 0 {
			b.WriteString("Artifacts:\n")
			for _, art := range f.artifacts {
				fmt.Fprintf(&b, "- %s (%s)", art.GetName(), humanSize(art.GetSizeInBytes()))
				if art.GetExpired() {
					b.WriteString(", expired")
				}
				b.WriteString("\n")
				artList = append(artList, map[string]any{"name": art.GetName(), "size_in_bytes": art.GetSizeInBytes(), "expired": art.GetExpired()})
			}
		}
		structured["artifacts"] = artList
	} else {
		// A workflow_run webhook carries the run alone; "jobs" and
		// "artifacts" are left out rather than reported empty.
		b.WriteString("The run's end came with GitHub's workflow_run webhook, which does not carry its jobs, artifacts or logs: they are on the run's page.\n")
	}

	state, known := conclusionState(conclusion)
	if !known {
		a.log.Warn("unknown workflow run conclusion; reporting a tool error", "run", d.RunID, "conclusion", a.red.Clean(conclusion, 50))
	}
	o.State = state
	switch conclusion {
	case "neutral", "skipped":
		fmt.Fprintf(&b, "The run finished without failures (%s).\n", conclusion)
	case "action_required":
		fmt.Fprintf(&b, "The run needs a maintainer's action on GitHub, which the bridge cannot take: %s\n", run.GetHTMLURL())
	}
	if o.State == adapters.StateToolError {
		for _, lt := range f.tails {
			if lt.err != "" {
				fmt.Fprintf(&b, "\nThe log of job %s is not available: %s\n", lt.job, lt.err)
				continue
			}
			fmt.Fprintf(&b, "\nLast %d lines of the log of job %s:\n%s\n", *t.cfg.LogTailLines, lt.job, lt.text)
		}
		if f.moreFailed > 0 {
			fmt.Fprintf(&b, "(logs of %d more failed jobs left out)\n", f.moreFailed)
		}
	}
	// A run has no completion time of its own: its updated_at moves last
	// when it completes.
	o.FinishedAt = run.GetUpdatedAt().Time
	o.Message = a.red.Clean("completed: "+orNone(conclusion), maxMessage)
	o.Result = &adapters.Result{Text: strings.TrimRight(a.red.Redact(b.String()), "\n"), Structured: structured}
	return o
}

// conclusionState maps a completed run's conclusion onto a state; known is
// false for a conclusion GitHub has not documented (a tool error).
func conclusionState(conclusion string) (state adapters.State, known bool) {
	switch conclusion {
	case "success", "neutral", "skipped":
		return adapters.StateSucceeded, true
	case "cancelled":
		return adapters.StateCancelled, true
	case "failure", "timed_out", "startup_failure", "stale", "action_required":
		return adapters.StateToolError, true
	}
	return adapters.StateToolError, false
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// jobs lists the jobs of the run's latest attempt, following GitHub's pages
// (100 jobs each, at most maxListPages). Every page goes through the
// request budget: when it is spent, the observation waits for the next
// poll rather than reporting a partial list.
func (a *Adapter) jobs(ctx context.Context, d refData) ([]*github.WorkflowJob, error) {
	opts := &github.ListWorkflowJobsOptions{Filter: "latest", ListOptions: github.ListOptions{PerPage: perPage}}
	var all []*github.WorkflowJob
	for page := 1; page <= maxListPages; page++ {
		opts.Page = page
		jobs, resp, err := a.gh.Actions.ListWorkflowJobs(ctx, d.Owner, d.Repo, d.RunID, opts)
		if err != nil {
			return nil, a.apiError(err)
		}
		all = append(all, jobs.Jobs...)
		if resp.NextPage == 0 || len(jobs.Jobs) == 0 {
			break
		}
	}
	return all, nil
}

// artifacts lists the run's artifacts, following GitHub's pages as jobs
// does.
func (a *Adapter) artifacts(ctx context.Context, d refData) ([]*github.Artifact, error) {
	opts := &github.ListOptions{PerPage: perPage}
	var all []*github.Artifact
	for page := 1; page <= maxListPages; page++ {
		opts.Page = page
		arts, resp, err := a.gh.Actions.ListWorkflowRunArtifacts(ctx, d.Owner, d.Repo, d.RunID, opts)
		if err != nil {
			return nil, a.apiError(err)
		}
		all = append(all, arts.Artifacts...)
		if resp.NextPage == 0 || len(arts.Artifacts) == 0 {
			break
		}
	}
	return all, nil
}

// logTail downloads a job's log (GitHub answers with a redirect to a
// pre-signed URL) and returns its last n lines.
func (a *Adapter) logTail(ctx context.Context, d refData, jobID int64, n int) (string, error) {
	u, _, err := a.gh.Actions.GetWorkflowJobLogs(ctx, d.Owner, d.Repo, jobID, 1)
	if err != nil {
		return "", a.apiError(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("log download URL: %w", err)
	}
	resp, err := a.blobs.Do(req)
	if err != nil {
		return "", errors.New(a.red.Clean(err.Error(), 300))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("log download answered HTTP %d", resp.StatusCode)
	}
	return tailLines(io.LimitReader(resp.Body, maxLogBytes), n)
}

// tailLines returns the last n lines of r, each cut to maxLogLine bytes and
// stripped of control characters other than tabs.
func tailLines(r io.Reader, n int) (string, error) {
	ring := make([]string, n)
	count := 0
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			ring[count%n] = cleanLogLine(line)
			count++
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("reading the log: %w", err)
		}
	}
	start := max(count-n, 0)
	lines := make([]string, 0, min(count, n))
	for i := start; i < count; i++ {
		lines = append(lines, ring[i%n])
	}
	return strings.Join(lines, "\n"), nil
}

func cleanLogLine(s string) string {
	s = strings.TrimRight(s, "\r\n")
	if len(s) > maxLogLine {
		cut := maxLogLine
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r == '\t' {
			return r
		}
		if unicode.IsControl(r) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// Respond delivers the answers to deployment reviews: "accept" with decision
// approve approves, with decision reject (or a "decline") rejects, both with
// the comment given (or a default one); "cancel" sends nothing and the run
// keeps waiting. An answer for a deployment that no longer waits is not an
// error.
func (a *Adapter) Respond(ctx context.Context, ref adapters.JobRef, answers map[string]adapters.Answer) error {
	d, _, err := a.decodeRef(ref)
	if err != nil {
		return fmt.Errorf("answering run: %w", err)
	}
	var errs []error
	for _, key := range sortedKeys(answers) {
		ans := answers[key]
		ids, ok := parseApprovalKey(key)
		if !ok {
			a.log.Warn("ignoring an answer to an unknown question", "run", d.RunID, "key", a.red.Clean(key, 100))
			continue
		}
		state, comment, send := reviewOf(ans)
		if !send {
			continue
		}
		_, _, err := a.gh.Actions.PendingDeployments(ctx, d.Owner, d.Repo, d.RunID, github.PendingDeploymentsRequest{
			EnvironmentIDs: ids, State: state, Comment: comment,
		})
		switch {
		case err == nil:
			a.log.Info("deployment review sent", "run", d.RunID, "state", state)
		case a.noLongerPending(ctx, d, ids, err):
			a.log.Info("deployment no longer waits; answer not delivered", "run", d.RunID)
		default:
			errs = append(errs, fmt.Errorf("reviewing the deployment of run %d: %w", d.RunID, a.apiError(err)))
		}
	}
	a.memoDrop(d.key())
	return errors.Join(errs...)
}

// reviewOf turns an answer into a review state and comment; send is false
// for "cancel".
func reviewOf(ans adapters.Answer) (state, comment string, send bool) {
	comment, _ = ans.Content["comment"].(string)
	comment = strings.TrimSpace(comment)
	switch {
	case ans.Action == "accept" && ans.Content["decision"] == "approve":
		state = "approved"
	case ans.Action == "accept" && ans.Content["decision"] == "reject", ans.Action == "decline":
		state = "rejected"
	case ans.Action == "accept":
		// No decision: approving is never the default.
		state = "rejected"
		if comment == "" {
			comment = "Rejected through jobbridge: the answer made no decision."
		}
	default:
		return "", "", false
	}
	if comment == "" {
		comment = "Approved through jobbridge."
		if state == "rejected" {
			comment = "Rejected through jobbridge."
		}
	}
	return state, comment, true
}

// noLongerPending reports whether a refused review (409 or 422) came because
// none of the environments waits any more, for example after someone else
// reviewed it.
func (a *Adapter) noLongerPending(ctx context.Context, d refData, ids []int64, err error) bool {
	er, ok := errors.AsType[*github.ErrorResponse](err)
	if !ok || er.Response == nil || (er.Response.StatusCode != http.StatusConflict && er.Response.StatusCode != http.StatusUnprocessableEntity) {
		return false
	}
	pending, _, perr := a.gh.Actions.GetPendingDeployments(ctx, d.Owner, d.Repo, d.RunID)
	if perr != nil {
		return false
	}
	for _, p := range pending {
		for _, id := range ids {
			if p.GetEnvironment().GetID() == id {
				return false
			}
		}
	}
	return true
}

// parseApprovalKey reads the environment IDs from a key made by waiting:
// "deployment.<attempt>.<id>_<id>...".
func parseApprovalKey(key string) ([]int64, bool) {
	parts := strings.Split(key, ".")
	if len(parts) != 3 || parts[0] != approvalPrefix {
		return nil, false
	}
	var ids []int64
	for _, s := range strings.Split(parts[2], "_") {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return nil, false
		}
		ids = append(ids, id)
	}
	return ids, true
}
