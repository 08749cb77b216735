package bridge

// Handles for clients that cannot follow a task.
//
// A client that does not ask for a task (an agent SDK running headless, the
// Vercel AI SDK's MCP client, mcp-go, which speaks only 2025-11-25 tasks)
// gets a synchronous call. For a tool whose catalog says
// `after_sync_budget: return_handle`, such a call is backed by a durable
// task from the start: the call waits for it within the tool's sync_budget
// and answers the job's result when it ends in time; otherwise, at the
// budget, it answers a normal tool result saying the job is still running,
// with the task's ID (its handle) and what to call next, and the job goes
// on. A confirmation the client cannot be asked for (no elicitation) makes
// the call answer at once with the handle of a task waiting for it.
//
// The server then lists three companion tools: task_status, task_cancel and
// task_answer. They are tasks/get, tasks/cancel and tasks/update shaped as
// tools, and go through those very paths: bound to the caller the same way
// (another principal's task reads as unknown, like a missing one), counted
// against the same gets_per_second limit over HTTP, and answered from the
// same durable rows.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/lifecycle"
	"github.com/jobbridge/jobbridge/mapping"
)

// The companion tools' names (catalog.CompanionTools).
const (
	toolTaskStatus = "task_status"
	toolTaskCancel = "task_cancel"
	toolTaskAnswer = "task_answer"
)

const taskIDProperty = `"task_id": {"type": "string", "description": "The task's ID, from the result that said the job goes on as a task."}`

// addCompanions lists the companion tools when some tool returns handles.
func (b *Bridge) addCompanions(s *mcp.Server) {
	if !b.cat.UsesHandles() {
		return
	}
	readOnly, notDestructive, destructive := true, false, true
	s.AddTool(&mcp.Tool{
		Name:        toolTaskStatus,
		Title:       "Task status",
		Description: "Tells how a job that goes on as a task is doing: its status, message and progress, the questions it waits for, and, once it has ended, its result. Call it with the task_id a tool's result gave, at most every poll_interval_ms.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {` + taskIDProperty + `}, "required": ["task_id"]}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: readOnly, DestructiveHint: &notDestructive, IdempotentHint: true},
	}, b.companion(b.taskStatus))
	s.AddTool(&mcp.Tool{
		Name:        toolTaskCancel,
		Title:       "Cancel a task",
		Description: "Cancels a job that goes on as a task: the cancel is forwarded to the backend, and the answer says what happened.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {` + taskIDProperty + `}, "required": ["task_id"]}`),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive, IdempotentHint: true},
	}, b.companion(b.taskCancel))
	s.AddTool(&mcp.Tool{
		Name:        toolTaskAnswer,
		Title:       "Answer a task's question",
		Description: "Answers the open questions of a task waiting for input (task_status lists them with their keys and forms). A confirmation is the user's to give: ask the user, and answer {\"confirm\": true} only if they agreed; false or anything else submits nothing.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {` + taskIDProperty + `, "answers": {"type": "object", "description": "The answers by the key of each open question: the form's content (taken as accepted), e.g. {\"jobbridge.confirm\": {\"confirm\": true}}, or an elicitation result such as {\"action\": \"decline\"}. With one question open, its content alone is enough."}}, "required": ["task_id", "answers"]}`),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &notDestructive},
	}, b.companion(b.taskAnswer))
}

// companionArgs are the arguments of the companion tools.
type companionArgs struct {
	TaskID  string                     `json:"task_id"`
	Answers map[string]json.RawMessage `json:"answers"`
}

// companion decodes a companion tool's arguments and applies the
// gets_per_second limit that tasks/* requests count against over HTTP.
func (b *Bridge) companion(fn func(ctx context.Context, args companionArgs) *mcp.CallToolResult) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args companionArgs
		if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &args); err != nil {
				return toolError("invalid arguments for %s: %v", req.Params.Name, err), nil
			}
		}
		if args.TaskID == "" {
			return toolError("invalid arguments for %s: task_id is required", req.Params.Name), nil
		}
		if req.Params.Name == toolTaskAnswer && len(args.Answers) == 0 {
			return toolError("invalid arguments for %s: answers is required (the answers by the key of each open question)", req.Params.Name), nil
		}
		if extra := req.GetExtra(); extra != nil && extra.Header != nil {
			if wait, ok := b.rates.allowPoll(principalFrom(ctx), b.limits.GetsPerSecond); !ok {
				b.metrics.reject("poll_rate")
				return toolError("too many task requests: call at most every poll_interval_ms; try again in %s", lifecycle.CeilSeconds(wait)), nil
			}
		}
		return fn(ctx, args), nil
	}
}

// asTasksRequest is the params of the tasks/* request a companion tool
// stands for: it declares the extension, as the request it replaces would
// have.
func asTasksRequest(id string, answers map[string]json.RawMessage) *taskParams {
	p := &taskParams{TaskID: id, InputResponses: answers}
	p.Meta = mcp.Meta{mcp.MetaKeyClientCapabilities: map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}}
	return p
}

// companionFailure turns the error of a tasks/* path into a tool error: an
// unknown, expired or foreign task reads the same.
func companionFailure(id string, err error) *mcp.CallToolResult {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) && rpc.Code == jsonrpc.CodeInvalidParams {
		return toolError("unknown task %q: no task with this ID is visible to you (it may have expired)", id)
	}
	msg := err.Error()
	if errors.As(err, &rpc) {
		msg = rpc.Message
	}
	return toolError("the task could not be read: %s", msg)
}

// taskStatus is task_status: tasks/get as a tool.
func (b *Bridge) taskStatus(ctx context.Context, args companionArgs) *mcp.CallToolResult {
	d, err := b.tasksGet(ctx, nil, asTasksRequest(args.TaskID, nil))
	if err != nil {
		return companionFailure(args.TaskID, err)
	}
	return b.statusResult(d, "")
}

// taskCancel is task_cancel: tasks/cancel as a tool, saying what happened.
func (b *Bridge) taskCancel(ctx context.Context, args companionArgs) *mcp.CallToolResult {
	before, err := b.lookup(ctx, asTasksRequest(args.TaskID, nil))
	if err != nil {
		return companionFailure(args.TaskID, err)
	}
	if before.Status.Terminal() {
		return b.statusResult(b.detailed(args.TaskID, before), fmt.Sprintf("The task had already ended (%s); there was nothing to cancel.", before.Status))
	}
	if _, err := b.tasksCancel(ctx, nil, asTasksRequest(args.TaskID, nil)); err != nil {
		return companionFailure(args.TaskID, err)
	}
	after, err := b.lookup(ctx, asTasksRequest(args.TaskID, nil))
	if err != nil {
		return companionFailure(args.TaskID, err)
	}
	var said string
	switch {
	case after.Status == mapping.StatusCancelled:
		said = "The task was cancelled."
	case after.Status.Terminal():
		said = fmt.Sprintf("The job ended (%s) before the cancel took effect.", after.Status)
	case after.CancelSentAt != nil:
		said = fmt.Sprintf("The cancel was sent to %s; the task ends cancelled once the job has stopped (task_status tells).", after.Backend)
	default:
		said = "The cancel is recorded and will be sent to the backend; task_status tells when the job has stopped."
	}
	return b.statusResult(b.detailed(args.TaskID, after), said)
}

// taskAnswer is task_answer: tasks/update as a tool, saying whether the
// answers settled the task's questions.
func (b *Bridge) taskAnswer(ctx context.Context, args companionArgs) *mcp.CallToolResult {
	before, err := b.lookup(ctx, asTasksRequest(args.TaskID, nil))
	if err != nil {
		return companionFailure(args.TaskID, err)
	}
	open := lifecycle.DecodeInputs(before.InputRequests)
	if before.Status != mapping.StatusInputRequired || len(open) == 0 {
		r := b.statusResult(b.detailed(args.TaskID, before), fmt.Sprintf("The task is not waiting for input (it is %s); nothing was answered.", before.Status))
		r.IsError = true
		return r
	}
	answers, ignored := answersFor(open, args.Answers)
	if len(answers) == 0 {
		return toolError("none of the answers names an open question of the task (given: %s; open: %s); call task_status to see them", quoteList(ignored), quoteList(sortedKeys(open)))
	}
	if _, err := b.tasksUpdate(ctx, nil, asTasksRequest(args.TaskID, answers)); err != nil {
		return companionFailure(args.TaskID, err)
	}
	after, err := b.lookup(ctx, asTasksRequest(args.TaskID, nil))
	if err != nil {
		return companionFailure(args.TaskID, err)
	}
	said := "The answers were recorded."
	if after.Status == mapping.StatusInputRequired {
		still := lifecycle.DecodeInputs(after.InputRequests)
		for k := range answers {
			if _, ok := still[k]; ok {
				said = "The answer did not settle the question: " + after.StatusMessage + "."
				break
			}
		}
	}
	if len(ignored) > 0 {
		said += fmt.Sprintf(" Ignored (no open question by that key, or not a form's content): %s.", quoteList(ignored))
	}
	return b.statusResult(b.detailed(args.TaskID, after), said)
}

// answersFor turns task_answer's answers into the inputResponses of
// tasks/update: each value is an elicitation result (with an action) or the
// content of an accepted form (an object). With a single question open and
// no object answer naming it, the answers as a whole are its content:
// {"confirm": true} answers a lone question whose form asks for confirm,
// whatever its key.
func answersFor(open map[string]lifecycle.Input, given map[string]json.RawMessage) (map[string]json.RawMessage, []string) {
	out := map[string]json.RawMessage{}
	var ignored []string
	for k, v := range given {
		if _, ok := open[k]; !ok {
			ignored = append(ignored, k)
			continue
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(v, &obj) != nil {
			if len(open) == 1 {
				continue // not a form's content: the whole is, below
			}
			ignored = append(ignored, k)
			continue
		}
		out[k] = asElicitResult(v)
	}
	if len(out) == 0 && len(open) == 1 {
		for k := range open {
			whole, _ := json.Marshal(given)
			out[k] = asElicitResult(whole)
		}
		ignored = nil
	}
	sort.Strings(ignored)
	return out, ignored
}

// asElicitResult reads an answer: an elicitation result as is, anything
// else as the content of an accepted form.
func asElicitResult(v json.RawMessage) json.RawMessage {
	var probe struct {
		Action *string `json:"action"`
	}
	if json.Unmarshal(v, &probe) == nil && probe.Action != nil {
		return v
	}
	b, _ := json.Marshal(map[string]json.RawMessage{"action": json.RawMessage(`"accept"`), "content": v})
	return b
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// statusResult shapes a DetailedTask as a tool result: a live task's status
// and questions, or an ended task's result (its own, with the task added),
// its error, or why it was cancelled. lead, when set, opens the summary.
func (b *Bridge) statusResult(d *detailedTaskResult, lead string) *mcp.CallToolResult {
	info := &taskInfo{ID: d.TaskID, Status: d.Status, StatusMessage: d.StatusMessage}
	if d.PollIntervalMs != nil {
		info.PollIntervalMs = *d.PollIntervalMs
	}
	join := func(s string) string { return strings.TrimSpace(lead + " " + s) }
	switch mapping.Status(d.Status) {
	case mapping.StatusCompleted:
		if r, ok := withTask(d.Result, info, lead); ok {
			return r
		}
		env := &resultEnvelope{Summary: join("The task completed."), Outcome: outcomeSucceeded, Task: info}
		return envelopeResult(env, false)
	case mapping.StatusFailed:
		msg := d.StatusMessage
		if d.Error != nil && d.Error.Message != "" {
			msg = d.Error.Message
		}
		env := &resultEnvelope{Summary: join("The task failed: " + msg), Outcome: outcomeFailed, Reason: msg, Task: info}
		return envelopeResult(env, true)
	case mapping.StatusCancelled:
		env := &resultEnvelope{Summary: join("The task was cancelled: " + d.StatusMessage), Outcome: outcomeCancelled, Reason: d.StatusMessage, Task: info}
		return envelopeResult(env, true)
	}
	env := &resultEnvelope{Task: info, Outcome: outcomeRunning}
	env.Summary = join(fmt.Sprintf("The task is still running: %s. Call task_status again in %s or so.", orWorking(d.StatusMessage), pollText(info)))
	env.Next = []nextCall{
		{Tool: toolTaskStatus, Arguments: map[string]any{"task_id": d.TaskID}, Purpose: "see how the job is doing and get its result once it has ended"},
		{Tool: toolTaskCancel, Arguments: map[string]any{"task_id": d.TaskID}, Purpose: "stop the job"},
	}
	if d.Status == string(mapping.StatusInputRequired) {
		env.Outcome = outcomeInputRequired
		env.InputRequests = map[string]inputInfo{}
		for k, raw := range d.InputRequests {
			var e elicitation
			json.Unmarshal(raw, &e)
			env.InputRequests[k] = inputInfo{Message: e.Params.Message, Schema: e.Params.RequestedSchema}
		}
		env.Summary = join(questionSummary(env.InputRequests))
		env.Next = append([]nextCall{{Tool: toolTaskAnswer, Arguments: map[string]any{"task_id": d.TaskID, "answers": exampleAnswers(env.InputRequests)}, Purpose: "answer the question (a confirmation only after the user agreed)"}}, env.Next...)
	}
	return envelopeResult(env, false)
}

func orWorking(msg string) string {
	if msg == "" {
		return "working"
	}
	return msg
}

func pollText(info *taskInfo) string {
	if info.PollIntervalMs <= 0 {
		return "a few seconds"
	}
	return (time.Duration(info.PollIntervalMs) * time.Millisecond).String()
}

// questionSummary says what a task waits for and how to answer.
func questionSummary(qs map[string]inputInfo) string {
	var sb strings.Builder
	if q, ok := qs[confirmKey]; ok && len(qs) == 1 {
		fmt.Fprintf(&sb, "The task waits for the user's confirmation: %q. Nothing has been submitted. Ask the user; if they agree, call task_answer with answers {%q: {\"confirm\": true}}; to drop it, call task_cancel.", q.Message, confirmKey)
		return sb.String()
	}
	sb.WriteString("The task waits for answers:")
	for _, k := range sortedKeys(qs) {
		fmt.Fprintf(&sb, " %s: %q;", k, qs[k].Message)
	}
	sb.WriteString(" answer them with task_answer (answers by key, each the form's content).")
	return sb.String()
}

// exampleAnswers is the shape of task_answer's answers for the open
// questions: a confirmation gets {"confirm": true}, other forms {}.
func exampleAnswers(qs map[string]inputInfo) map[string]any {
	out := map[string]any{}
	for k := range qs {
		if k == confirmKey {
			out[k] = map[string]any{"confirm": true}
		} else {
			out[k] = map[string]any{}
		}
	}
	return out
}

// withTask is a stored tool result with the task added to its structured
// content and lead (when set) before its text.
func withTask(raw json.RawMessage, info *taskInfo, lead string) (*mcp.CallToolResult, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil, false
	}
	if sc, ok := m["structuredContent"].(map[string]any); ok {
		if _, envelope := sc["outcome"]; envelope {
			sc["task"] = info
		}
	}
	if lead != "" {
		if content, ok := m["content"].([]any); ok {
			m["content"] = append([]any{map[string]any{"type": "text", "text": lead}}, content...)
		}
	}
	delete(m, "resultType")
	b, err := json.Marshal(m)
	if err != nil {
		return nil, false
	}
	var r mcp.CallToolResult
	if json.Unmarshal(b, &r) != nil {
		return nil, false
	}
	return &r, true
}

// envelopeResult is a tool result whose text mirrors env: the summary, then
// the task, the job, the questions and the next calls, one per line.
func envelopeResult(env *resultEnvelope, isError bool) *mcp.CallToolResult {
	var sb strings.Builder
	sb.WriteString(env.Summary)
	if env.Reason != "" && !strings.Contains(env.Summary, env.Reason) {
		fmt.Fprintf(&sb, "\nReason: %s", env.Reason)
	}
	if t := env.Task; t != nil {
		fmt.Fprintf(&sb, "\n\nTask: %s (%s)", t.ID, t.Status)
		if t.StatusMessage != "" {
			fmt.Fprintf(&sb, "\nStatus: %s", t.StatusMessage)
		}
	}
	if j := env.Job; j != nil && j.ID != "" {
		fmt.Fprintf(&sb, "\nJob: %s on %s", j.ID, j.Backend)
		if j.URL != "" {
			fmt.Fprintf(&sb, " (%s)", j.URL)
		}
	}
	for _, k := range sortedKeys(env.InputRequests) {
		q := env.InputRequests[k]
		fmt.Fprintf(&sb, "\nQuestion %s: %s (form: %s)", k, q.Message, q.Schema)
	}
	for _, n := range env.Next {
		a, _ := json.Marshal(n.Arguments)
		fmt.Fprintf(&sb, "\nNext: %s %s to %s", n.Tool, a, n.Purpose)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: sb.String()}},
		StructuredContent: env,
		IsError:           isError,
	}
}

// confirmedTool is t for a task whose confirmation was already given (in
// the call, through elicitation): its task starts submitting.
func confirmedTool(t *tool) *tool {
	if t.Confirm == nil {
		return t
	}
	ct := *t.Tool
	ct.Confirm = nil
	c := *t
	c.Tool = &ct
	return &c
}

// handleUnconfirmed answers a call, without tasks, of a tool that asks for
// a confirmation the client cannot be asked for (it declared no
// elicitation): the task is created waiting for the confirmation, and the
// answer is its handle. Nothing is submitted until task_answer confirms.
func (b *Bridge) handleUnconfirmed(ctx context.Context, t *tool, args map[string]any) (*mcp.CallToolResult, error) {
	id, task, early, err := b.newTask(ctx, t, args, 0)
	if err != nil {
		return nil, err
	}
	if early != nil {
		return early.(*mcp.CallToolResult), nil
	}
	return b.handleResult(t, id, task), nil
}

// runWithHandle serves a call without tasks of a tool that returns handles:
// the job runs as a task, which the call follows within the sync budget.
// It answers the job's result when the task ends in time, and the task's
// handle when the budget runs out or the job asks a question. A client that
// goes away before either never got the handle: nobody can follow the job,
// so the task is cancelled as tasks/cancel would.
func (b *Bridge) runWithHandle(ctx context.Context, t *tool, args map[string]any, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id, task, early, err := b.newTask(ctx, confirmedTool(t), args, 0)
	if err != nil {
		return nil, err
	}
	if early != nil {
		return early.(*mcp.CallToolResult), nil
	}
	b.log.Info("call without tasks runs as a task", "task", shortKey(task.Key), "tool", t.Name, "backend", t.Backend)
	budget := time.NewTimer(t.SyncBudget)
	defer budget.Stop()
	var progress *syncProgress
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		progress = newSyncProgress(ctx, req.Session, token, min(2*t.PollInterval, maxProgressGap), task.StatusMessage)
		defer progress.stop()
	}
	every := min(t.RefreshInterval, t.PollInterval)
	if every <= 0 {
		every = time.Second
	}
	for {
		if ctx.Err() != nil {
			b.abandon(ctx, id, task)
			return nil, requestCancelled(fmt.Sprintf("the job of task %s was cancelled: nobody holds its handle", id))
		}
		rctx, cancel := context.WithTimeout(b.ctx, b.opts.CallTimeout)
		cur, err := b.store.Get(rctx, task.Key, task.Principal, b.opts.Now())
		cancel()
		if err == nil {
			task = b.lc.Refresh(ctx, cur, b.opts.ObserveBudget)
		}
		switch {
		case task.Status.Terminal():
			return b.endedResult(task)
		case task.Status == mapping.StatusInputRequired:
			return b.handleResult(t, id, task), nil
		}
		if progress != nil {
			progress.observe(adapters.Observation{Message: task.StatusMessage})
		}
		select {
		case <-ctx.Done():
			continue
		case <-budget.C:
			if ctx.Err() != nil {
				continue
			}
			return b.handleResult(t, id, task), nil
		case <-time.After(every):
		}
	}
}

// abandon cancels the task of a call whose client went away before it got
// the handle.
func (b *Bridge) abandon(ctx context.Context, id string, task *mapping.Task) {
	b.metrics.syncCancelled.WithLabelValues(task.Tool).Inc()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.opts.CallTimeout)
	defer cancel()
	if _, err := b.tasksCancel(cctx, nil, asTasksRequest(id, nil)); err != nil {
		b.log.Warn("cancelling the task of a call whose client went away", "task", shortKey(task.Key), "error", err)
	}
}

// endedResult is what a synchronous call answers for a task that ended
// within the budget: the job's result, its JSON-RPC error, or why it was
// cancelled.
func (b *Bridge) endedResult(task *mapping.Task) (*mcp.CallToolResult, error) {
	var o outcome
	json.Unmarshal(task.Outcome, &o)
	switch task.Status {
	case mapping.StatusFailed:
		e := o.Error
		if e == nil {
			e = &wireError{Code: -32603, Message: task.StatusMessage}
		}
		return nil, &jsonrpc.Error{Code: int64(e.Code), Message: e.Message}
	case mapping.StatusCompleted:
		raw := o.Result
		if len(raw) == 0 {
			raw = toolResultText(task.StatusMessage, false)
		}
		var res mcp.CallToolResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, internalError("reading the stored result: %v", err)
		}
		return &res, nil
	}
	env := &resultEnvelope{Summary: "The job was cancelled: " + task.StatusMessage, Outcome: outcomeCancelled, Reason: task.StatusMessage}
	if task.JobID != "" {
		env.Job = &jobInfo{Backend: task.Backend, ID: task.JobID}
	}
	return envelopeResult(env, true), nil
}

// handleResult is the answer of a call whose job goes on as a task: not an
// error, saying the job is still running (or waits for an answer), with the
// task's ID and the calls that follow it.
func (b *Bridge) handleResult(t *tool, id string, task *mapping.Task) *mcp.CallToolResult {
	d := b.detailed(id, task)
	r := b.statusResult(d, "")
	env, _ := r.StructuredContent.(*resultEnvelope)
	if env == nil {
		return r
	}
	if task.JobID != "" {
		env.Job = &jobInfo{Backend: task.Backend, ID: task.JobID}
	}
	if env.Outcome == outcomeRunning {
		env.Summary = fmt.Sprintf("%s is still running after %s, the limit for a call without tasks; the job goes on as task %s. Call task_status with {\"task_id\": %s} every %s or so to see how it goes and to get its result; task_cancel stops it.",
			t.Name, t.SyncBudget, id, strconv.Quote(id), pollText(env.Task))
	} else {
		env.Summary = fmt.Sprintf("%s goes on as task %s. %s", t.Name, id, env.Summary)
	}
	return envelopeResult(env, false)
}
