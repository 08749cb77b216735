package bridge

// Revision 2025-11-25 and its experimental tasks.
//
// Most deployed clients speak protocol 2025-11-25, whose tasks are not the
// Tasks extension: the server declares capabilities.tasks at initialize and
// execution.taskSupport per tool; a tools/call with params.task answers a
// nested {task: Task}; tasks/get and tasks/cancel answer a flat Task (ttl and
// pollInterval in ms); tasks/list lists the caller's tasks; tasks/result
// blocks until the task is terminal and returns what tools/call would have,
// relaying input requests (elicitation/create) on the way. These requests
// work on the same durable rows as the extension's: same store, binding,
// TTL, adapters and cancel forwarding.
//
// Which rules apply is decided per request: a request whose _meta declares
// protocol 2026-07-28 follows the extension; otherwise one that arrives on a
// session (or, over stateless HTTP, with an Mcp-Protocol-Version header) that
// negotiated 2025-11-25 follows that revision; any other gets neither.

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/lifecycle"
	"github.com/jobbridge/jobbridge/mapping"
)

// legacyProtocol is the revision with the experimental tasks.
const legacyProtocol = "2025-11-25"

// legacyTaskMeta is the _meta key under which the transports hand a
// tools/call's params.task to the bridge: the SDK's CallToolParams has no
// task field and drops it. A client's own value for the key is removed.
const legacyTaskMeta = "io.jobbridge/legacy-task"

// relatedTaskMeta associates a message with a task (2025-11-25).
const relatedTaskMeta = "io.modelcontextprotocol/related-task"

// rewriteIncoming adjusts a message read from a client before the SDK
// decodes it: see moveTaskParam.
func (b *Bridge) rewriteIncoming(m jsonrpc.Message) jsonrpc.Message {
	req, ok := m.(*jsonrpc.Request)
	if !ok || req.Method != "tools/call" {
		return m
	}
	if params, changed := moveTaskParam(req.Params); changed {
		c := *req
		c.Params = params
		return &c
	}
	return m
}

// moveTaskParam moves a tools/call's params.task into
// params._meta[legacyTaskMeta], and removes a client-sent value of that key.
// It reports whether it changed anything.
func moveTaskParam(params json.RawMessage) (json.RawMessage, bool) {
	if !bytes.Contains(params, []byte(`"task"`)) && !bytes.Contains(params, []byte(legacyTaskMeta)) {
		return params, false
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return params, false // the SDK reports the malformed params
	}
	var meta map[string]json.RawMessage
	if raw, ok := p["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return params, false
	}
	_, spoofed := meta[legacyTaskMeta]
	task, hasTask := p["task"]
	if !spoofed && !hasTask {
		return params, false
	}
	delete(meta, legacyTaskMeta)
	delete(p, "task")
	if hasTask && string(task) != "null" {
		if meta == nil {
			meta = map[string]json.RawMessage{}
		}
		meta[legacyTaskMeta] = task
	}
	if meta != nil {
		raw, err := json.Marshal(meta)
		if err != nil {
			return params, false
		}
		p["_meta"] = raw
	}
	out, err := json.Marshal(p)
	if err != nil {
		return params, false
	}
	return out, true
}

// legacyTaskParam is params.task of a 2025-11-25 tools/call.
type legacyTaskParam struct {
	TTL *int64 `json:"ttl,omitempty"`
}

// taskParamOf returns the params.task the transport moved into _meta.
func taskParamOf(meta map[string]any) (*legacyTaskParam, bool) {
	v, ok := meta[legacyTaskMeta]
	if !ok {
		return nil, false
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return &legacyTaskParam{}, true
	}
	var p legacyTaskParam
	json.Unmarshal(raw, &p) // a malformed ttl is ignored: the tool's TTL applies
	return &p, true
}

// revision is the set of rules a request follows.
type revision int

const (
	revisionNone   revision = iota // neither: no tasks
	revisionLegacy                 // 2025-11-25 experimental tasks
	revisionModern                 // 2026-07-28 Tasks extension
)

type revisionKey struct{}

func withRevision(ctx context.Context, r revision) context.Context {
	return context.WithValue(ctx, revisionKey{}, r)
}

func revisionFrom(ctx context.Context) revision {
	r, _ := ctx.Value(revisionKey{}).(revision)
	return r
}

// requestRevision decides which rules a request follows.
func requestRevision(req mcp.Request) revision {
	if meta := metaOf(req); meta != nil {
		if v, _ := meta[mcp.MetaKeyProtocolVersion].(string); v >= modernProtocol {
			return revisionModern
		}
	}
	if negotiatedVersion(req) == legacyProtocol {
		return revisionLegacy
	}
	return revisionNone
}

// metaOf returns a request's params._meta (nil for a request without
// params: the SDK hands typed nil params to middleware).
func metaOf(req mcp.Request) map[string]any {
	p := req.GetParams()
	if p == nil {
		return nil
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return p.GetMeta()
}

// negotiatedVersion is the protocol version a request's session settled on:
// the session's, or over stateless HTTP the Mcp-Protocol-Version header.
func negotiatedVersion(req mcp.Request) string {
	if extra := req.GetExtra(); extra != nil && extra.Header != nil {
		if v := extra.Header.Get("Mcp-Protocol-Version"); v != "" {
			return v
		}
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		if p := ss.InitializeParams(); p != nil {
			return p.ProtocolVersion
		}
	}
	return ""
}

// clientCaps returns the capabilities the request's client declared: in the
// request's _meta (2026-07-28) or at initialize on its session.
func clientCaps(req mcp.Request) *mcp.ClientCapabilities {
	if r, ok := req.(*mcp.CallToolRequest); ok {
		if c := r.ClientCapabilities(); c != nil {
			return c
		}
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		if p := ss.InitializeParams(); p != nil && p.Capabilities != nil {
			return p.Capabilities
		}
	}
	return &mcp.ClientCapabilities{}
}

// patchedResult is a result whose JSON was changed after the SDK built it
// (the SDK's types have no field for what 2025-11-25 adds).
type patchedResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (p *patchedResult) MarshalJSON() ([]byte, error) { return p.raw, nil }

// patch marshals res, lets edit change its JSON object and returns it as a
// result.
func patch(res mcp.Result, edit func(m map[string]any)) (mcp.Result, error) {
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, internalError("encoding result: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, internalError("encoding result: %v", err)
	}
	edit(m)
	out, err := json.Marshal(m)
	if err != nil {
		return nil, internalError("encoding result: %v", err)
	}
	return &patchedResult{raw: out}, nil
}

// legacyCapability is the 2025-11-25 tasks capability: task-augmented
// tools/call, tasks/list and tasks/cancel.
var legacyCapability = map[string]any{
	"list":     map[string]any{},
	"cancel":   map[string]any{},
	"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}},
}

// taskSupport is a tool's execution.taskSupport under 2025-11-25.
func taskSupport(mode catalog.TaskMode) string {
	switch mode {
	case catalog.TaskRequired:
		return "required"
	case catalog.TaskOptional:
		return "optional"
	}
	return "forbidden"
}

// legacyMiddleware serves what 2025-11-25 changes. handled is false when the
// request is the extension's or the core's to answer.
func (b *Bridge) legacyMiddleware(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (res mcp.Result, err error, handled bool) {
	switch method {
	case "initialize":
		res, err := next(ctx, method, req)
		ir, ok := res.(*mcp.InitializeResult)
		if err != nil || !ok || ir.ProtocolVersion != legacyProtocol {
			return res, err, true
		}
		res, err = patch(ir, func(m map[string]any) {
			caps, _ := m["capabilities"].(map[string]any)
			if caps == nil {
				caps = map[string]any{}
				m["capabilities"] = caps
			}
			caps["tasks"] = legacyCapability
			// The extension is not defined under 2025-11-25.
			if ext, ok := caps["extensions"].(map[string]any); ok {
				delete(ext, TasksExtension)
				if len(ext) == 0 {
					delete(caps, "extensions")
				}
			}
		})
		return res, err, true
	}
	if revisionFrom(ctx) != revisionLegacy {
		switch method {
		case "tasks/list", "tasks/result":
			// Not methods of the extension (2026-07-28 answers -32601).
			return nil, methodNotFound(method + " is a 2025-11-25 method; under 2026-07-28 poll tasks/get, whose answer carries the result"), true
		}
		return nil, nil, false
	}
	switch method {
	case "tools/list":
		res, err := next(ctx, method, req)
		if err != nil || res == nil {
			return res, err, true
		}
		res, err = patch(res, func(m map[string]any) {
			tools, _ := m["tools"].([]any)
			for _, e := range tools {
				mt, _ := e.(map[string]any)
				name, _ := mt["name"].(string)
				if t := b.toolNamed(name); t != nil {
					mt["execution"] = map[string]any{"taskSupport": taskSupport(t.Task)}
				}
			}
		})
		return res, err, true
	case "tools/call":
		r, ok := req.(*mcp.CallToolRequest)
		if !ok {
			return nil, nil, false
		}
		t := b.toolNamed(r.Params.Name)
		if t == nil {
			return nil, nil, false
		}
		tp, asTask := taskParamOf(r.Params.GetMeta())
		switch {
		case asTask && t.Task == catalog.TaskNever:
			return nil, methodNotFound(fmt.Sprintf("tool %s does not run as a task (its execution.taskSupport is forbidden); call it without params.task", t.Name)), true
		case !asTask && t.Task == catalog.TaskRequired:
			return nil, methodNotFound(fmt.Sprintf("tool %s runs only as a task (its execution.taskSupport is required); call it with params.task", t.Name)), true
		case !asTask:
			return nil, nil, false // the synchronous path
		}
		res, err := b.legacyCreate(ctx, t, r, tp)
		return res, err, true
	case "tasks/update":
		return nil, methodNotFound("tasks/update is a 2026-07-28 method; under 2025-11-25 answer input requests through tasks/result"), true
	case "tasks/get":
		res, err := next(ctx, method, req)
		if err != nil {
			return nil, err, true
		}
		d, ok := res.(*detailedTaskResult)
		if !ok {
			return res, nil, true
		}
		b.watchLegacyID(ctx, req, d.TaskID) // legacypush.go
		return legacyTaskOf(d.taskFields), nil, true
	case "tasks/cancel":
		res, err := b.legacyCancel(ctx, req)
		return res, err, true
	}
	return nil, nil, false
}

// methodNotFound is -32601 with a message saying what works instead.
func methodNotFound(msg string) error { return &notFoundError{msg: msg} }

// notFoundError is a -32601 whose message survives the SDK: the SDK
// rewrites every error that errors.Is a -32601 wire error into its own
// "method not found: METHOD", losing what the server said. This one is not
// such an error for errors.Is, but is one for errors.As, which the SDK's
// encoder uses for the code.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

func (e *notFoundError) As(target any) bool {
	if w, ok := target.(**jsonrpc.Error); ok {
		*w = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: e.msg}
		return true
	}
	return false
}

// legacyTask is a Task of 2025-11-25: ttl and pollInterval in
// milliseconds, ttl always present.
type legacyTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  *int64 `json:"pollInterval,omitempty"`
}

func legacyFields(f taskFields) legacyTask {
	return legacyTask{
		TaskID:        f.TaskID,
		Status:        f.Status,
		StatusMessage: f.StatusMessage,
		CreatedAt:     f.CreatedAt,
		LastUpdatedAt: f.LastUpdatedAt,
		TTL:           f.TTLMs,
		PollInterval:  f.PollIntervalMs,
	}
}

// legacyTaskResult is the flat Task of tasks/get and tasks/cancel.
type legacyTaskResult struct {
	mcp.ResultBase
	legacyTask
}

func legacyTaskOf(f taskFields) *legacyTaskResult {
	return &legacyTaskResult{legacyTask: legacyFields(f)}
}

// legacyCreateResult is the nested CreateTaskResult of 2025-11-25.
type legacyCreateResult struct {
	mcp.ResultBase
	Task legacyTask `json:"task"`
}

// legacyCreate creates the durable task of a task-augmented 2025-11-25
// tools/call.
func (b *Bridge) legacyCreate(ctx context.Context, t *tool, r *mcp.CallToolRequest, tp *legacyTaskParam) (mcp.Result, error) {
	if caller := callerFrom(ctx); caller != nil && !t.allows(caller) {
		b.metrics.reject("tool_denied")
		return nil, invalidParams("unknown tool %q", r.Params.Name)
	}
	if len(r.Params.Arguments) > b.limits.MaxArgumentBytes {
		b.metrics.reject("argument_size")
		return toolError("the arguments are %d bytes; this server accepts at most %d", len(r.Params.Arguments), b.limits.MaxArgumentBytes), nil
	}
	caps := clientCaps(r)
	elicitOK := caps.Elicitation != nil
	if t.Confirm != nil && !elicitOK {
		return nil, missingCapability(elicitationCapability(),
			"elicitation: the tool asks for confirmation, which a 2025-11-25 client answers through tasks/result; declare the elicitation capability at initialize")
	}
	args, pending, err := b.resolveArgs(t, r.Params, false)
	if err != nil {
		return nil, err
	}
	if pending != nil {
		// A 2025-11-25 tools/call cannot be asked for missing arguments.
		return pending, nil
	}
	var ttl time.Duration
	if tp != nil && tp.TTL != nil && *tp.TTL > 0 {
		ttl = time.Duration(*tp.TTL) * time.Millisecond
	}
	id, task, early, err := b.newTask(ctx, t, args, ttl)
	if err != nil || early != nil {
		return early, err
	}
	b.watchLegacy(ctx, r, id, task) // legacypush.go
	return &legacyCreateResult{Task: legacyFields(b.fields(id, task))}, nil
}

// legacyCancel answers a 2025-11-25 tasks/cancel: a terminal task is
// refused with -32602; otherwise the cancel is forwarded downstream (waiting
// for the backend's answer) and, as the revision requires, the task is
// cancelled before the answer, which is the Task. Its message says what the
// backend answered, so that a job the backend could not stop is not hidden.
func (b *Bridge) legacyCancel(ctx context.Context, req mcp.Request) (mcp.Result, error) {
	p, err := legacyParams(req)
	if err != nil {
		return nil, err
	}
	task, err := b.lookup(ctx, p)
	if err != nil {
		return nil, err
	}
	if task.Status.Terminal() {
		return nil, invalidParams("Cannot cancel task: already in terminal status '%s'", task.Status)
	}
	if _, err := b.tasksCancel(ctx, nil, p); err != nil {
		return nil, err
	}
	// tasksCancel forwarded the cancel (or another replica holds it): read
	// what the backend answered, then end the task.
	cur, err := b.store.Get(ctx, task.Key, task.Principal, b.opts.Now())
	if err != nil {
		return nil, internalError("the task store is unavailable")
	}
	updated, err := b.lc.CancelNow(cur)
	if errors.Is(err, lifecycle.ErrTerminal) {
		// The job ended first; the revision still wants the Task.
		updated, err = b.store.Get(ctx, task.Key, task.Principal, b.opts.Now())
	}
	if err != nil {
		b.log.Error("recording cancel", "task", shortKey(task.Key), "error", err)
		return nil, internalError("the cancel could not be recorded")
	}
	b.lc.Forget(task.Key)
	return legacyTaskOf(b.fields(p.TaskID, updated)), nil
}

// legacyParams decodes the {taskId} params of a 2025-11-25 tasks/* request.
func legacyParams(req mcp.Request) (*taskParams, error) {
	p, ok := req.GetParams().(*taskParams)
	if !ok || p == nil {
		return nil, invalidParams("taskId is required")
	}
	return p, nil
}

// listParams are the params of tasks/list.
type listParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// listResult is the answer to tasks/list.
type listResult struct {
	mcp.ResultBase
	Tasks      []legacyTask `json:"tasks"`
	NextCursor string       `json:"nextCursor,omitempty"`
}

// listPage is how many tasks one tasks/list page holds.
const listPage = 50

// tasksList answers 2025-11-25 tasks/list: the caller's own tasks, newest
// first, by pages. A task whose ID this server cannot open (it was sealed
// with another state key) is left out.
func (b *Bridge) tasksList(ctx context.Context, _ *mcp.ServerSession, p *listParams) (*listResult, error) {
	if revisionFrom(ctx) != revisionLegacy {
		return nil, methodNotFound("tasks/list is a 2025-11-25 method")
	}
	var after *mapping.Cursor
	if p != nil && p.Cursor != "" {
		c, err := mapping.ParseCursor(p.Cursor)
		if err != nil {
			return nil, invalidParams("invalid cursor")
		}
		after = c
	}
	tasks, next, err := b.store.ListByPrincipal(ctx, principalFrom(ctx), b.opts.Now(), after, listPage)
	if err != nil {
		b.log.Error("listing tasks", "error", err)
		return nil, internalError("the task store is unavailable")
	}
	res := &listResult{Tasks: []legacyTask{}}
	for _, t := range tasks {
		id, ok := b.openID(t)
		if !ok {
			continue
		}
		res.Tasks = append(res.Tasks, legacyFields(b.fields(id, t)))
	}
	if next != nil {
		res.NextCursor = next.Encode()
	}
	return res, nil
}

// resultWait bounds how long one tasks/result waits for a task to end.
const resultWait = 10 * time.Minute

// progressEvery is how often a waiting tasks/result reports progress, when
// the request asked for it.
const progressEvery = 15 * time.Second

// tasksResult answers 2025-11-25 tasks/result: it waits until the task is
// terminal and returns what the tools/call would have returned, with the
// related-task _meta. While the task waits for input, its questions are
// asked through elicitation/create on this request (with the related-task
// _meta) and the answers applied as tasks/update would.
func (b *Bridge) tasksResult(ctx context.Context, ss *mcp.ServerSession, p *taskParams) (mcp.Result, error) {
	if revisionFrom(ctx) != revisionLegacy {
		return nil, methodNotFound("tasks/result is a 2025-11-25 method")
	}
	task, err := b.lookup(ctx, p)
	if err != nil {
		return nil, err
	}
	defer b.sessions.waitResult(task.Key)() // legacypush.go
	deadline := time.Now().Add(resultWait)
	token := p.Meta["progressToken"]
	var progress float64
	lastProgress := time.Now()
	asked := map[string]bool{}
	for {
		task = b.lc.Refresh(ctx, task, b.opts.ObserveBudget)
		if task.Status.Terminal() {
			return b.legacyOutcome(p.TaskID, task)
		}
		if task.Status == mapping.StatusInputRequired && ss != nil {
			if err := b.relayInput(ctx, ss, p.TaskID, task, asked); err != nil {
				return nil, err
			}
		}
		if time.Now().After(deadline) {
			return nil, internalError("task %s is still %s after %s; poll tasks/get and call tasks/result again once it has ended", p.TaskID, task.Status, resultWait)
		}
		if token != nil && ss != nil && time.Since(lastProgress) >= progressEvery {
			progress++
			lastProgress = time.Now()
			ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress, Message: sanitize(task.StatusMessage, 200)})
		}
		select {
		case <-ctx.Done():
			return nil, requestCancelled("the wait for the task's result")
		case <-time.After(min(b.pollInterval(task), time.Second)):
		}
		cur, err := b.store.Get(ctx, task.Key, task.Principal, b.opts.Now())
		if err != nil {
			return nil, taskNotFound()
		}
		task = cur
	}
}

// relayInput asks the client, through elicitation/create on the session,
// each of the task's open questions not asked in this tasks/result yet, and
// applies the answers as tasks/update does.
func (b *Bridge) relayInput(ctx context.Context, ss *mcp.ServerSession, id string, task *mapping.Task, asked map[string]bool) error {
	for key, in := range lifecycle.DecodeInputs(task.InputRequests) {
		if asked[key] || !b.sessions.claimQuestion(task.Key, key) { // legacypush.go
			continue
		}
		asked[key] = true
		res, err := ss.Elicit(ctx, &mcp.ElicitParams{
			Meta:            mcp.Meta{relatedTaskMeta: map[string]any{"taskId": id}},
			Mode:            "form",
			Message:         in.Prompt(),
			RequestedSchema: json.RawMessage(in.Schema),
		})
		if err != nil {
			b.sessions.releaseQuestion(task.Key, key) // legacypush.go
			if ctx.Err() != nil {
				return requestCancelled("the wait for the task's result")
			}
			return internalError("task %s needs input, and asking for it failed: %v; this client must accept elicitation/create requests on tasks/result (stdio, or HTTP with a session)", id, err)
		}
		answer, err := json.Marshal(elicitAnswer{Action: res.Action, Content: res.Content})
		if err != nil {
			return internalError("encoding the answer: %v", err)
		}
		up := &taskParams{TaskID: id, InputResponses: map[string]json.RawMessage{key: answer}}
		if _, err := b.tasksUpdate(ctx, nil, up); err != nil {
			return err
		}
		if key == confirmKey && res.Action == "accept" {
			// An answer that did not confirm leaves the question open,
			// with the reason: ask it again on the next round.
			delete(asked, key)
			b.sessions.releaseQuestion(task.Key, key) // legacypush.go
		}
	}
	return nil
}

// legacyOutcome is what the tools/call of a terminal task would have
// returned: its result (completed, and cancelled with the reason as an
// error result) or its JSON-RPC error (failed), with the related-task
// _meta.
func (b *Bridge) legacyOutcome(id string, t *mapping.Task) (mcp.Result, error) {
	related := map[string]any{relatedTaskMeta: map[string]any{"taskId": id}}
	var o outcome
	json.Unmarshal(t.Outcome, &o)
	switch t.Status {
	case mapping.StatusFailed:
		e := o.Error
		if e == nil {
			e = &wireError{Code: -32603, Message: t.StatusMessage}
		}
		data, _ := json.Marshal(related)
		return nil, &jsonrpc.Error{Code: int64(e.Code), Message: e.Message, Data: data}
	case mapping.StatusCompleted:
		raw := o.Result
		if len(raw) == 0 {
			raw = toolResultText(t.StatusMessage, false)
		}
		return resultWithMeta(raw, related)
	}
	raw := o.Result
	if len(raw) == 0 {
		raw = toolResultText(t.StatusMessage, true)
	}
	return resultWithMeta(raw, related)
}

// resultWithMeta is a stored tool result with _meta merged in.
func resultWithMeta(raw json.RawMessage, meta map[string]any) (mcp.Result, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, internalError("reading the stored result: %v", err)
	}
	delete(m, "resultType") // 2026-07-28 only
	old, _ := m["_meta"].(map[string]any)
	if old == nil {
		old = map[string]any{}
	}
	for k, v := range meta {
		old[k] = v
	}
	m["_meta"] = old
	out, err := json.Marshal(m)
	if err != nil {
		return nil, internalError("encoding the result: %v", err)
	}
	return &patchedResult{raw: out}, nil
}

// Sealed task IDs. The store keys tasks by the hash of their ID and never
// holds an ID, so tasks/list could not name them. Each row carries its ID
// sealed (AES-256-GCM) under a key derived from the bridge's state key:
// the store alone cannot open it; replicas that share JOBBRIDGE_STATE_KEY
// can.

func (b *Bridge) idCipher() cipher.AEAD {
	b.sealOnce.Do(func() {
		k := sha256.Sum256(append([]byte("jobbridge task id seal\x00"), b.opts.StateKey...))
		block, err := aes.NewCipher(k[:])
		if err != nil {
			panic(fmt.Sprintf("bridge: task ID cipher: %v", err)) // a 32-byte key cannot fail
		}
		if b.sealAEAD, err = cipher.NewGCM(block); err != nil {
			panic(fmt.Sprintf("bridge: task ID cipher: %v", err))
		}
	})
	return b.sealAEAD
}

// reseal gives a live task read by its ID a sealed ID this server can open
// (a task created before sealed IDs, or under another state key), so that
// tasks/list shows it again. A terminal row cannot change; it stays out of
// tasks/list until it expires.
func (b *Bridge) reseal(id string, t *mapping.Task) {
	if t.Status.Terminal() {
		return
	}
	if _, ok := b.openID(t); ok {
		return
	}
	b.lc.Reseal(t, func(k mapping.Key) []byte { return b.sealID(id, k) })
}

// sealID seals a task ID for its row (the key as additional data, so that
// a sealed ID copied to another row does not open).
func (b *Bridge) sealID(id string, key mapping.Key) []byte {
	aead := b.idCipher()
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	return aead.Seal(nonce, nonce, []byte(id), key[:])
}

// openID opens a row's sealed task ID and checks it against the row's key.
func (b *Bridge) openID(t *mapping.Task) (string, bool) {
	aead := b.idCipher()
	if len(t.SealedID) < aead.NonceSize() {
		return "", false
	}
	nonce, sealed := t.SealedID[:aead.NonceSize()], t.SealedID[aead.NonceSize():]
	id, err := aead.Open(nil, nonce, sealed, t.Key[:])
	if err != nil || mapping.KeyOf(string(id)) != t.Key {
		return "", false
	}
	return string(id), true
}

// legacySessionIdle is how long an idle 2025-11-25 HTTP session is kept.
const legacySessionIdle = 30 * time.Minute
