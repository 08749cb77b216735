package bridge

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/user"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/lifecycle"
	"github.com/jobbridge/jobbridge/mapping"
)

// ConfirmKey is the input request key of a tool's confirmation: answer it
// with accept and {"confirm": true} to submit the job.
const ConfirmKey = lifecycle.ConfirmKey

// Input-request keys the bridge itself uses. Backend keys are passed through
// as the adapter reports them; these carry a prefix no backend key is
// expected to use.
const (
	confirmKey   = ConfirmKey
	argumentsKey = "jobbridge.arguments"
)

// confirmSchema is the form of a confirmation prompt.
// Its one field is required, and only true submits the job.
var confirmSchema = json.RawMessage(`{"type":"object","properties":{"confirm":{"type":"boolean","title":"Confirm","description":"Tick to submit the job."}},"required":["confirm"]}`)

// resolveArgs decodes and validates a call's arguments. When required
// arguments are missing and the client declared elicitation, it returns an
// InputRequiredResult asking for them (one or more rounds; answers gathered
// in earlier rounds travel in a signed requestState). Invalid arguments give
// a tool error result, so that the model can correct itself.
func (b *Bridge) resolveArgs(t *tool, p *mcp.CallToolParamsRaw, elicitOK bool) (map[string]any, *mcp.CallToolResult, error) {
	args := map[string]any{}
	if len(p.Arguments) > 0 && string(p.Arguments) != "null" {
		if err := json.Unmarshal(p.Arguments, &args); err != nil {
			return nil, toolError("arguments must be a JSON object: %v", err), nil
		}
	}
	if p.RequestState != "" {
		var earlier map[string]any
		if err := b.openState(p.RequestState, t.Name, &earlier); err != nil {
			return nil, nil, invalidParams("requestState: %v", err)
		}
		for k, v := range earlier {
			if _, ok := args[k]; !ok {
				args[k] = v
			}
		}
	}
	t.applyDefaults(args)
	missing := t.missingRequired(args)
	if r, ok := p.InputResponses[argumentsKey]; ok && len(missing) > 0 {
		e, ok := r.(*mcp.ElicitResult)
		if !ok {
			return nil, nil, invalidParams("inputResponses[%q] must be an elicitation result", argumentsKey)
		}
		if e.Action != "accept" {
			did := "declined"
			if e.Action == "cancel" {
				did = "cancelled the request"
			}
			return nil, toolError("the call needs %s, and the user %s to provide %s; call again with %s in the arguments", quoteList(missing), did, pronoun(missing), pronoun(missing)), nil
		}
		for _, name := range missing {
			if v, ok := e.Content[name]; ok {
				args[name] = v
			}
		}
		missing = t.missingRequired(args)
	}
	if len(missing) > 0 && elicitOK {
		if form, ok := t.elicitForm(missing); ok {
			state, err := b.sealState(t.Name, args)
			if err != nil {
				return nil, nil, internalError("sealing request state: %v", err)
			}
			return nil, &mcp.CallToolResult{
				InputRequests: mcp.InputRequestMap{argumentsKey: &mcp.ElicitParams{
					Mode:            "form",
					Message:         fmt.Sprintf("%s needs %s.", t.Name, quoteList(missing)),
					RequestedSchema: form,
				}},
				RequestState: state,
			}, nil
		}
	}
	if err := t.schema.Validate(args); err != nil {
		return nil, toolError("invalid arguments for %s: %v", t.Name, err), nil
	}
	return args, nil, nil
}

// applyDefaults gives each top-level property the schema declares a default
// for, and args lacks, its default, before the arguments are validated and
// templated into the job.
func (t *tool) applyDefaults(args map[string]any) {
	props, _ := t.raw["properties"].(map[string]any)
	for name, p := range props {
		ps, _ := p.(map[string]any)
		if d, ok := ps["default"]; ok {
			if _, given := args[name]; !given {
				args[name] = d
			}
		}
	}
}

// missingRequired lists the schema's required properties absent from args.
func (t *tool) missingRequired(args map[string]any) []string {
	req, _ := t.raw["required"].([]any)
	var missing []string
	for _, r := range req {
		name, _ := r.(string)
		if _, ok := args[name]; name != "" && !ok {
			missing = append(missing, name)
		}
	}
	return missing
}

// elicitForm builds a form asking for the missing properties. It fails when
// a property is not a primitive a form can ask for.
func (t *tool) elicitForm(missing []string) (map[string]any, bool) {
	props, _ := t.raw["properties"].(map[string]any)
	form := map[string]any{}
	for _, name := range missing {
		p, _ := props[name].(map[string]any)
		typ, _ := p["type"].(string)
		switch typ {
		case "string", "number", "integer", "boolean":
		default:
			return nil, false
		}
		f := map[string]any{"type": typ}
		for _, k := range []string{"title", "description", "enum", "minimum", "maximum", "minLength", "maxLength", "default", "format"} {
			if v, ok := p[k]; ok {
				f[k] = v
			}
		}
		form[name] = f
	}
	req := make([]any, len(missing))
	for i, m := range missing {
		req[i] = m
	}
	return map[string]any{"type": "object", "properties": form, "required": req}, true
}

// sealState encodes v with an HMAC bound to the tool and a short expiry, so
// that a client cannot forge arguments it was never asked for.
func (b *Bridge) sealState(toolName string, v any) (string, error) {
	body, err := json.Marshal(struct {
		Tool    string `json:"t"`
		Expires int64  `json:"e"`
		Value   any    `json:"v"`
	}{toolName, b.opts.Now().Add(15 * time.Minute).Unix(), v})
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, b.opts.StateKey)
	mac.Write(body)
	return base64URL(body) + "." + base64URL(mac.Sum(nil)), nil
}

func (b *Bridge) openState(state, toolName string, v any) error {
	body64, sig64, ok := strings.Cut(state, ".")
	if !ok {
		return errors.New("malformed")
	}
	body, err1 := base64.RawURLEncoding.DecodeString(body64)
	sig, err2 := base64.RawURLEncoding.DecodeString(sig64)
	if err1 != nil || err2 != nil {
		return errors.New("malformed")
	}
	mac := hmac.New(sha256.New, b.opts.StateKey)
	mac.Write(body)
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return errors.New("signature does not verify")
	}
	var s struct {
		Tool    string          `json:"t"`
		Expires int64           `json:"e"`
		Value   json.RawMessage `json:"v"`
	}
	if err := json.Unmarshal(body, &s); err != nil {
		return errors.New("malformed")
	}
	if s.Tool != toolName {
		return errors.New("issued for another tool")
	}
	if b.opts.Now().Unix() > s.Expires {
		return errors.New("expired")
	}
	return json.Unmarshal(s.Value, v)
}

// syncHandler serves a tool synchronously: the call waits for the job, up to
// the tool's budget. It runs for tools in mode never, and in mode optional
// when the client did not declare the tasks extension.
func (b *Bridge) syncHandler(t *tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		caps := req.ClientCapabilities()
		elicitOK := caps != nil && caps.Elicitation != nil
		args, pending, err := b.resolveArgs(t, req.Params, elicitOK)
		if err != nil || pending != nil {
			return pending, err
		}
		if t.Confirm != nil {
			r, answered := req.Params.InputResponses[confirmKey]
			if !answered {
				if !elicitOK {
					if t.ReturnsHandle() { // handle.go
						return b.handleUnconfirmed(ctx, t, args)
					}
					return nil, missingCapability(elicitationCapability(), "elicitation (the tool asks for confirmation)")
				}
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{confirmKey: &mcp.ElicitParams{
					Mode: "form", Message: t.ConfirmMessage(args), RequestedSchema: confirmSchema,
				}}}, nil
			}
			e, ok := r.(*mcp.ElicitResult)
			if !ok {
				return nil, invalidParams("inputResponses[%q] must be an elicitation result", confirmKey)
			}
			switch verdict, why := lifecycle.JudgeConfirmation(adapters.Answer{Action: e.Action, Content: e.Content}); verdict {
			case lifecycle.ConfirmNo:
				return toolError("%s; no job was submitted", why), nil
			case lifecycle.ConfirmUnclear:
				// Ask again, saying why the answer did not confirm.
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{confirmKey: &mcp.ElicitParams{
					Mode: "form", Message: "Not confirmed: " + why + ".\n\n" + t.ConfirmMessage(args), RequestedSchema: confirmSchema,
				}}}, nil
			}
		}
		return b.runSync(ctx, t, args, req)
	}
}

// runSync starts the job and waits for it within the tool's sync budget. A
// job nobody can follow is never left running: if the client goes away or
// cancels the request, or the budget runs out (an answer sent then may be
// lost against the client's own time-out), the job is cancelled downstream.
// A client that sent a progress token hears of the job whenever a poll
// brings news and otherwise at least every min(2*poll_interval, 15s) while
// it waits, so that its request time-out can be reset.
func (b *Bridge) runSync(ctx context.Context, t *tool, args map[string]any, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if t.ReturnsHandle() { // handle.go: the job runs as a task, and outlives the budget
		return b.runWithHandle(ctx, t, args, req)
	}
	if b.hasCallKey(ctx, t, args) { // idempotency.go
		return b.runSyncIdempotent(ctx, t, args, req)
	}
	var progress *syncProgress // nil: the client asked for no progress
	sreq := adapters.StartRequest{Tool: t.Name, Arguments: args, CorrelationID: newCorrelationID()}
	// The submission itself must not be torn in half by a client that
	// disconnects: run it on the bridge's lifetime, bounded.
	ref, err := b.lc.StartJob(b.ctx, t.lifecycleTool(), sreq, func(time.Duration, string) bool { return ctx.Err() == nil })
	if err != nil {
		switch {
		case errors.Is(err, lifecycle.ErrSubmissionStopped):
			return nil, requestCancelled("no job was submitted")
		case errors.Is(err, adapters.ErrOutcomeUnknown):
			return toolError("the backend %q may or may not have started the job (correlation ID %s): %s", t.Backend, sreq.CorrelationID, sanitize(err.Error(), 1024)), nil
		case errors.Is(err, adapters.ErrJobUnaddressable):
			return toolError("%s; the job probably exists: look for correlation ID %s on %q and stop it if it should not run", sanitize(err.Error(), 1024), sreq.CorrelationID, t.Backend), nil
		}
		return toolError("%s", lifecycle.Refusal(t.Backend, err)), nil
	}
	b.log.Info("sync job started", "tool", t.Name, "backend", t.Backend, "job", ref.ID)
	budget := time.NewTimer(t.SyncBudget)
	defer budget.Stop()
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		// Clients time a request out (60s by default in the TypeScript
		// SDK) unless progress keeps arriving: report while waiting, even
		// when the backend reports nothing new.
		p := newSyncProgress(ctx, req.Session, token, min(2*t.PollInterval, maxProgressGap),
			fmt.Sprintf("job %s started on backend %q", ref.ID, t.Backend))
		defer p.stop()
		progress = p
	}
	wait := time.Duration(0)
	for {
		if ctx.Err() != nil {
			// Checked first, so that a budget that runs out at the same
			// moment does not win.
			b.cancelUnfollowed(t, ref, "the client went away")
			return nil, requestCancelled(fmt.Sprintf("job %s was cancelled downstream", ref.ID))
		}
		select {
		case <-ctx.Done():
			continue
		case <-budget.C:
			if ctx.Err() != nil {
				continue
			}
			b.cancelUnfollowed(t, ref, "the sync budget ran out")
			return toolError("job %s on backend %q was still running after %s, the limit for a call without tasks, so it was cancelled: without tasks nobody could follow it. To let it run, call %s with tasks: the 2026-07-28 tasks extension, or params.task under 2025-11-25.",
				ref.ID, t.Backend, t.SyncBudget, t.Name), nil
		case <-time.After(wait):
		}
		wait = t.RefreshInterval
		pctx, pcancel := context.WithTimeout(ctx, b.opts.CallTimeout)
		obs, err := t.adapter.Poll(pctx, []adapters.JobRef{ref})
		pcancel()
		if d, throttled := adapters.RetryAfter(err); throttled && d > wait {
			wait = d
		}
		if len(obs) == 1 && obs[0].Ref != nil {
			ref = *obs[0].Ref // the queued submission has become a job
		}
		if err != nil || len(obs) != 1 || obs[0].Err != nil {
			continue // transient: try again after the refresh interval
		}
		o := obs[0]
		if o.RetryAfter > wait {
			wait = o.RetryAfter
		}
		if progress != nil && !o.State.Terminal() {
			progress.observe(o)
		}
		switch o.State {
		case adapters.StateInputRequired:
			b.cancelUnfollowed(t, ref, "the job asked for input")
			return toolError("job %s on backend %q asked for input, which needs a client that supports the tasks extension, so it was cancelled", ref.ID, t.Backend), nil
		case adapters.StateFailed:
			code, msg := failure(o)
			return nil, &jsonrpc.Error{Code: int64(code), Message: msg}
		case adapters.StateSucceeded, adapters.StateToolError, adapters.StateCancelled:
			var res mcp.CallToolResult
			if err := json.Unmarshal(b.toolResultOf(t, o, ref), &res); err != nil {
				return nil, internalError("encoding result: %v", err)
			}
			return &res, nil
		}
	}
}

// maxProgressGap is the longest a synchronous call with a progress token
// goes without a progress notification: well within the 60s after which
// the TypeScript SDK times a request out unless progress resets its timer.
const maxProgressGap = 15 * time.Second

// progressScale: a notification that brings no new backend progress
// advances the reported value by 1/progressScale, since progress must
// increase with every notification.
const progressScale = 1000

// syncProgress reports the progress of a synchronous call to a client that
// asked for it (params._meta.progressToken): at each new observation of the
// job, and at least every gap while there is none. The values increase
// strictly: the backend's done/total when it reports them, else a counter
// from 0 in steps of 1/progressScale.
type syncProgress struct {
	ctx     context.Context
	session *mcp.ServerSession
	token   any
	gap     time.Duration
	done    chan struct{}
	exited  chan struct{}

	mu       sync.Mutex // held while a notification is sent, so they go out in order
	message  string
	backend  *adapters.Progress // the backend's last progress, if it reports any
	value    float64            // the last value sent
	notified bool               // whether value was sent
	sent     time.Time          // when the last notification was sent (or the wait began)
}

func newSyncProgress(ctx context.Context, ss *mcp.ServerSession, token any, gap time.Duration, message string) *syncProgress {
	p := &syncProgress{ctx: ctx, session: ss, token: token, gap: gap, message: message,
		done: make(chan struct{}), exited: make(chan struct{}), sent: time.Now()}
	go p.heartbeat()
	return p
}

// observe reports an observation at once if it brings news, and keeps it
// for the heartbeats.
func (p *syncProgress) observe(o adapters.Observation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	news := !p.notified
	if msg := sanitize(o.Message, 200); msg != "" && msg != p.message {
		p.message, news = msg, true
	}
	if o.Progress != nil && (p.backend == nil || *o.Progress != *p.backend) {
		pr := *o.Progress
		p.backend, news = &pr, true
	}
	if news {
		p.sendLocked()
	}
}

func (p *syncProgress) heartbeat() {
	defer close(p.exited)
	for {
		p.mu.Lock()
		next := time.Until(p.sent.Add(p.gap))
		p.mu.Unlock()
		timer := time.NewTimer(next)
		select {
		case <-p.done:
			timer.Stop()
			return
		case <-p.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		p.mu.Lock()
		if time.Since(p.sent) >= p.gap {
			p.sendLocked()
		}
		p.mu.Unlock()
	}
}

func (p *syncProgress) sendLocked() {
	// Without news from the backend the value creeps up by the smallest
	// step, so that a backend that starts reporting its progress late (once
	// its job leaves the queue) is not overtaken by a counter.
	v, total := (math.Round(p.value*progressScale)+1)/progressScale, 0.0
	if !p.notified {
		v = 0
	}
	if p.backend != nil {
		if p.backend.Done > p.value || !p.notified {
			v = p.backend.Done
		}
		if p.backend.Total >= v {
			total = p.backend.Total
		}
	}
	p.value, p.sent, p.notified = v, time.Now(), true
	// Best effort: a client that cannot take the notification will not
	// take the result either, and the wait notices its going.
	p.session.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{
		ProgressToken: p.token, Progress: v, Total: total, Message: p.message,
	})
}

// stop ends the heartbeats and waits for the last one.
func (p *syncProgress) stop() {
	close(p.done)
	<-p.exited
}

// cancelUnfollowed cancels, in the background on the bridge's lifetime, the
// job of a synchronous call that nobody can follow any more, trying again
// with backoff while the backend cannot be reached.
func (b *Bridge) cancelUnfollowed(t *tool, ref adapters.JobRef, why string) {
	b.metrics.syncCancelled.WithLabelValues(t.Name).Inc()
	b.goBackground(func() {
		for attempt := 1; attempt <= 5; attempt++ {
			// The first attempt is made even when the bridge is closing
			// (a stdio client that stopped the server mid-call): Close
			// waits for it, up to CallTimeout.
			parent := b.ctx
			if attempt == 1 {
				parent = context.WithoutCancel(b.ctx)
			}
			ctx, cancel := context.WithTimeout(parent, b.opts.CallTimeout)
			err := t.adapter.Cancel(ctx, ref)
			cancel()
			b.metrics.cancelForwarded(t.Backend, err)
			if err == nil || errors.Is(err, adapters.ErrAlreadyFinished) {
				b.log.Info("job of a synchronous call cancelled", "tool", t.Name, "job", ref.ID, "reason", why)
				return
			}
			b.log.Warn("cancelling the job of a synchronous call", "tool", t.Name, "job", ref.ID, "reason", why, "attempt", attempt, "error", err)
			if errors.Is(err, adapters.ErrCancelRefused) || b.ctx.Err() != nil {
				return
			}
			select {
			case <-b.ctx.Done():
				return
			case <-time.After(lifecycle.Jitter(lifecycle.Backoff(time.Second, attempt, 30*time.Second))):
			}
		}
	})
}

// requestCancelled is the error of a request the client cancelled or
// abandoned (JSON-RPC -32800, as LSP defines it; never the code 0 an
// unclassified Go error would get).
func requestCancelled(what string) error {
	return &jsonrpc.Error{Code: -32800, Message: "request cancelled; " + what}
}

// createTask creates a task for a call: the row is committed first, then the
// job is submitted in the background and the handle returned.
func (b *Bridge) createTask(ctx context.Context, t *tool, args map[string]any, elicitOK bool) (mcp.Result, error) {
	if t.Confirm != nil && !elicitOK {
		return nil, missingCapability(elicitationCapability(), "elicitation (the tool asks for confirmation)")
	}
	id, task, early, err := b.newTask(ctx, t, args, 0)
	if err != nil || early != nil {
		return early, err
	}
	if res, err, ok := b.inlineResult(ctx, t, id, &task); ok { // inline.go
		return res, err
	}
	return &createTaskResult{ResultType: "task", taskFields: b.fields(id, task)}, nil
}

// newTask creates a task's durable row and starts its submission (or its
// confirmation), under either protocol revision. ttl, when positive and
// shorter than the tool's, is the task's lifetime (a 2025-11-25 params.task
// may ask for one). early is the tool error a caller gets instead of a task
// (a limit reached).
func (b *Bridge) newTask(ctx context.Context, t *tool, args map[string]any, ttl time.Duration) (id string, task *mapping.Task, early mcp.Result, err error) {
	principal := principalFrom(ctx)
	argsJSON, err := json.Marshal(args)
	if err != nil {
		return "", nil, nil, internalError("encoding arguments: %v", err)
	}
	if ttl <= 0 || ttl > t.TTL {
		ttl = t.TTL
	}
	digest := sha256.Sum256(argsJSON)
	id = newTaskID()
	now := b.opts.Now().UTC()
	task = &mapping.Task{
		Key:             mapping.KeyOf(id),
		Principal:       principal,
		Tool:            t.Name,
		ArgsDigest:      hex.EncodeToString(digest[:]),
		ServerBuild:     b.opts.Build,
		CatalogRevision: b.revisionOf(t),
		Backend:         t.Backend,
		CorrelationID:   newCorrelationID(),
		Status:          mapping.StatusWorking,
		CreatedAt:       now,
		UpdatedAt:       now,
		TTL:             ttl,
		ExpiresAt:       now.Add(ttl),
		PollInterval:    t.PollInterval,
	}
	task.SealedID = b.sealID(id, task.Key)
	// The arguments stay in the row until the job reference is recorded,
	// so that a submission cut off by a crash can be looked up with them.
	task.Args = argsJSON
	if t.Confirm != nil {
		task.Phase = mapping.PhaseConfirming
		task.Status = mapping.StatusInputRequired
		task.StatusMessage = "waiting for the user to confirm"
		task.InputRequests = lifecycle.EncodeInputs(map[string]lifecycle.Input{
			confirmKey: {Message: t.ConfirmMessage(args), Schema: confirmSchema, Since: now},
		})
	} else {
		task.Phase = mapping.PhaseSubmitting
		task.StatusMessage = fmt.Sprintf("submitting the job to %s", t.Backend)
		task.SubmittedAt = &now
	}
	// Hold the submission before the row exists: alone on its store, the
	// sweep takes a submitting task nobody holds for one cut off by a crash.
	b.lc.HoldSubmission(task.Key)
	// The store enforces both limits with the insert, so that they hold
	// across the replicas sharing it.
	limits := mapping.CreateLimits{MaxLive: b.limits.MaxLiveTasks, PerMinute: b.limits.CreatesPerMinute}
	if err := b.createRow(ctx, task, limits); errors.As(err, new(*idempotentReuse)) { // idempotency.go
		b.lc.ReleaseSubmission(task.Key)
		id, task, early, err, _ := reused(err)
		return id, task, early, err
	} else if errors.Is(err, mapping.ErrLiveLimit) {
		b.lc.ReleaseSubmission(task.Key)
		b.metrics.reject("live_tasks")
		return "", nil, toolError("you have %d unfinished tasks, the limit; wait for some to finish or cancel them (tasks/cancel)", b.limits.MaxLiveTasks), nil
	} else if errors.Is(err, mapping.ErrRateLimit) {
		b.lc.ReleaseSubmission(task.Key)
		b.metrics.reject("create_rate")
		return "", nil, toolError("too many tasks created: the limit is %d per minute; try again shortly", b.limits.CreatesPerMinute), nil
	} else if err != nil {
		b.lc.ReleaseSubmission(task.Key)
		b.log.Error("creating task", "tool", t.Name, "error", err)
		return "", nil, nil, internalError("the task could not be stored")
	}
	b.log.Info("task created", "task", shortKey(task.Key), "tool", t.Name, "backend", t.Backend)
	if task.Phase == mapping.PhaseSubmitting {
		b.lc.StartSubmit(task, args)
	} else {
		b.lc.ReleaseSubmission(task.Key)
	}
	return id, task, nil, nil
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

func pronoun(names []string) string {
	if len(names) == 1 {
		return "it"
	}
	return "them"
}

func base64URL(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// shortKey is a loggable handle of a task: a prefix of the hash of its ID.
func shortKey(k mapping.Key) string { return hex.EncodeToString(k[:4]) }

func localUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}
