package bridge

// Idempotent calls. A call may carry a key of the caller's choosing in
// _meta["jobbridge/idempotencyKey"], or its tool may derive one from the
// arguments (the catalog's idempotency_key template). The first call with a
// key claims it in the store (mapping.IdempotencyStore: insert-if-absent on
// (principal, key), so that it holds across replicas and restarts) together
// with its new task; a later call with the same key from the same principal
// gets that task instead of a second job, while the task lives and, once it
// ended, within the tool's idempotency window. The same key with other
// arguments (or another tool) is refused with invalid params. The store
// holds the task ID only sealed (sealID), as the task row does.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jobbridge/jobbridge/adapters/expr"
	"github.com/jobbridge/jobbridge/mapping"
)

// IdempotencyKeyMeta is the _meta key under which a caller names a call
// with an idempotency key (a string).
const IdempotencyKeyMeta = "jobbridge/idempotencyKey"

// maxIdempotencyKey bounds the length of a key, in bytes.
const maxIdempotencyKey = 256

// idempotencyMeta is what a request's _meta said about its key.
type idempotencyMeta struct {
	key string
	err error // a key that is not a usable string
}

type idempotencyMetaKey struct{}

// withIdempotencyMeta records the request's idempotency key, if it sends
// one, in ctx: the middleware calls it for every request.
func withIdempotencyMeta(ctx context.Context, req mcp.Request) context.Context {
	meta := metaOf(req)
	v, ok := meta[IdempotencyKeyMeta]
	if !ok {
		return ctx
	}
	m := idempotencyMeta{}
	switch s, isString := v.(string); {
	case !isString:
		m.err = invalidParams("_meta[%q] must be a string", IdempotencyKeyMeta)
	case s == "":
		m.err = invalidParams("_meta[%q] must not be empty", IdempotencyKeyMeta)
	case len(s) > maxIdempotencyKey:
		m.err = invalidParams("_meta[%q] is %d bytes; at most %d are accepted", IdempotencyKeyMeta, len(s), maxIdempotencyKey)
	default:
		m.key = s
	}
	return context.WithValue(ctx, idempotencyMetaKey{}, m)
}

// callKey returns the idempotency key of a call to t with args: the one
// the request sent, else the one the tool's template derives ("" when
// neither gives one: an optional argument the template reads alone was
// left out).
func (b *Bridge) callKey(ctx context.Context, t *tool, args map[string]any) (string, error) {
	if m, ok := ctx.Value(idempotencyMetaKey{}).(idempotencyMeta); ok {
		return m.key, m.err
	}
	if t.Calls.IdempotencyKey == nil {
		return "", nil
	}
	key, missing, err := t.Calls.IdempotencyKey.Render(ctx, expr.CallVars(args, ""), expr.Raw, nil)
	if err != nil {
		// A catalog problem: say so, and start no job.
		return "", internalError("the tool's idempotency_key could not be computed from these arguments: %s", sanitize(err.Error(), 512))
	}
	if missing || key == "" {
		return "", nil
	}
	return key, nil
}

// callDigest identifies a call: its tool and its arguments (as stored).
func callDigest(toolName string, argsJSON []byte) string {
	h := sha256.New()
	h.Write([]byte(toolName))
	h.Write([]byte{0})
	h.Write(argsJSON)
	return hex.EncodeToString(h.Sum(nil))
}

// idempotentReuse is what createRow returns instead of creating a task:
// the task the key names (id, task), or the error of a refused reuse.
type idempotentReuse struct {
	id   string
	task *mapping.Task
	err  error
}

func (r *idempotentReuse) Error() string {
	if r.err != nil {
		return r.err.Error()
	}
	return "the idempotency key names an existing task"
}

// reused splits a createRow error that is an idempotentReuse into
// newTask's results.
func reused(err error) (id string, task *mapping.Task, early mcp.Result, rerr error, ok bool) {
	var r *idempotentReuse
	if !errors.As(err, &r) {
		return "", nil, nil, nil, false
	}
	return r.id, r.task, nil, r.err, true
}

// maxTakeovers bounds how often one call tries to take a key over from a
// task that is gone or past its window (each try loses only to another
// call that took it first, whose task it then gets).
const maxTakeovers = 4

// createRowWait bounds how long a call waits for the task of a key that
// another call has just claimed and not created yet.
const createRowWait = 2 * time.Second

// createRow stores a new task, through the lifecycle, unless the call has an
// idempotency key that names a task already: then it returns an
// *idempotentReuse with that task (or the refusal of a key reused with
// other arguments), and creates nothing.
func (b *Bridge) createRow(ctx context.Context, task *mapping.Task, limits mapping.CreateLimits) error {
	t := b.toolOf(task)
	var args map[string]any
	if t != nil && t.Calls.IdempotencyKey != nil {
		json.Unmarshal(task.Args, &args)
	}
	key := ""
	if t != nil {
		var err error
		if key, err = b.callKey(ctx, t, args); err != nil {
			return &idempotentReuse{err: err}
		}
	}
	if key == "" {
		return b.lc.Create(ctx, task, limits)
	}
	is, ok := b.opts.Store.(mapping.IdempotencyStore)
	if !ok {
		return &idempotentReuse{err: internalError("this call has an idempotency key, and %v; no job was started", mapping.ErrIdempotencyUnsupported)}
	}
	rec := &mapping.IdempotencyRecord{
		Principal:  task.Principal,
		KeyHash:    mapping.IdempotencyKeyOf(key),
		ArgsDigest: callDigest(task.Tool, task.Args),
		TaskKey:    task.Key,
		SealedID:   task.SealedID,
		CreatedAt:  task.CreatedAt,
		ExpiresAt:  task.ExpiresAt,
		Window:     t.Calls.Window(),
	}
	var replace *mapping.Key
	waitUntil := time.Now().Add(createRowWait)
	takeovers := 0
	for {
		if takeovers > maxTakeovers {
			return &idempotentReuse{err: internalError("idempotency key %q kept changing hands; no job was started: call again", sanitize(key, 80))}
		}
		now := b.opts.Now()
		held, err := is.ClaimIdempotencyKey(ctx, rec, replace, now)
		if err != nil {
			b.log.Error("claiming an idempotency key", "tool", task.Tool, "error", err)
			return &idempotentReuse{err: internalError("the idempotency key could not be recorded; no job was started")}
		}
		if held == nil {
			// The key is ours: create the task; if that fails, free it.
			if err := b.lc.Create(ctx, task, limits); err != nil {
				rctx, cancel := context.WithTimeout(b.ctx, b.opts.CallTimeout)
				if _, rerr := is.ReleaseIdempotencyKey(rctx, rec.Principal, rec.KeyHash, task.Key); rerr != nil {
					b.log.Warn("releasing an idempotency key", "error", rerr)
				}
				cancel()
				return err
			}
			return nil
		}
		// The key is held: by a task that still counts (then this call
		// gets it, if it is the same call), or by one that is gone or
		// ended longer ago than the window (then the key is free again).
		existing, err := b.store.Get(ctx, held.TaskKey, task.Principal, now)
		switch {
		case errors.Is(err, mapping.ErrNotFound):
			if now.Sub(held.CreatedAt) < b.opts.CallTimeout && time.Now().Before(waitUntil) {
				// Claimed a moment ago by a call that is creating its
				// task now: look again shortly.
				select {
				case <-ctx.Done():
					return &idempotentReuse{err: requestCancelled("no job was started")}
				case <-time.After(20 * time.Millisecond):
				}
				continue
			}
			if now.Sub(held.CreatedAt) < b.opts.CallTimeout {
				return &idempotentReuse{err: internalError("the first call with idempotency key %q is still creating its task; call again in a moment", sanitize(key, 80))}
			}
			// The task is gone (or never was: its creator stopped).
			replace = &held.TaskKey
			takeovers++
			continue
		case err != nil:
			b.log.Error("reading the task of an idempotency key", "error", err)
			return &idempotentReuse{err: internalError("the task store is unavailable")}
		case existing.Status.Terminal() && !now.Before(existing.UpdatedAt.Add(held.Window)):
			// Ended longer ago than the window: the key is free again.
			replace = &held.TaskKey
			takeovers++
			continue
		}
		if held.ArgsDigest != rec.ArgsDigest {
			return &idempotentReuse{err: invalidParams("idempotency key %q was first used for a call with different arguments (or another tool); the arguments differ, so no job was started: use a new key for a different call", sanitize(key, 80))}
		}
		id, ok := b.openID(&mapping.Task{Key: held.TaskKey, SealedID: held.SealedID})
		if !ok {
			return &idempotentReuse{err: internalError("idempotency key %q names a task this server cannot open (it was created under another JOBBRIDGE_STATE_KEY); no job was started", sanitize(key, 80))}
		}
		b.log.Info("call answered with the task of its idempotency key", "task", shortKey(existing.Key), "tool", task.Tool)
		b.metrics.reuses.WithLabelValues(task.Tool).Inc()
		return &idempotentReuse{id: id, task: existing}
	}
}

// hasCallKey reports whether a synchronous call has an idempotency key (or
// a key that is refused: runSyncIdempotent then says why).
func (b *Bridge) hasCallKey(ctx context.Context, t *tool, args map[string]any) bool {
	key, err := b.callKey(ctx, t, args)
	return key != "" || err != nil
}

// runSyncIdempotent serves a synchronous call that has an idempotency key.
// Its job runs as a task (so that a second call finds it and its result is
// stored): the call waits for it within the tool's sync budget, counted
// from the task's creation, and gets its result. A retry with the same key
// gets the stored result, or waits for it within what is left of the
// budget. When the budget runs out the job is cancelled, as for any
// synchronous call; a call whose client goes away leaves it running until
// then, for the retry to find. A client that sent a progress token hears
// from the call at least every min(2*poll_interval, 15s) while it waits,
// as runSync does, so that its request time-out is reset.
func (b *Bridge) runSyncIdempotent(ctx context.Context, t *tool, args map[string]any, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if _, err := b.callKey(ctx, t, args); err != nil {
		return nil, err
	}
	id, task, early, err := b.newTask(ctx, t, args, 0)
	if err != nil {
		return nil, err
	}
	if early != nil {
		if r, ok := early.(*mcp.CallToolResult); ok {
			return r, nil
		}
		return nil, internalError("unexpected answer")
	}
	ictx := withRevision(ctx, revisionLegacy) // the task's own calls, by ID
	p := &taskParams{TaskID: id}
	if task.Phase == mapping.PhaseConfirming {
		// The synchronous handler has the user's confirmation already.
		confirm, _ := json.Marshal(elicitAnswer{Action: "accept", Content: map[string]any{"confirm": true}})
		up := &taskParams{TaskID: id, InputResponses: map[string]json.RawMessage{confirmKey: confirm}}
		if _, err := b.tasksUpdate(ictx, nil, up); err != nil {
			return nil, err
		}
	}
	deadline := task.CreatedAt.Add(t.SyncBudget)
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		p := newSyncProgress(ctx, req.Session, token, min(2*t.PollInterval, maxProgressGap), "waiting for the job of this call")
		defer p.stop()
	}
	for {
		cur, err := b.store.Get(ctx, task.Key, task.Principal, b.opts.Now())
		if err != nil {
			return nil, internalError("the task of this call could not be read")
		}
		task = b.lc.Refresh(ctx, cur, b.opts.ObserveBudget)
		if task.Status.Terminal() {
			return syncOutcome(task)
		}
		if !b.opts.Now().Before(deadline) {
			b.metrics.syncCancelled.WithLabelValues(t.Name).Inc()
			if _, err := b.tasksCancel(ictx, nil, p); err != nil {
				return nil, err
			}
			return toolError("the job on backend %q was still running after %s, the limit for a call without tasks, so it was cancelled: without tasks nobody could follow it. To let it run, call %s with tasks: the 2026-07-28 tasks extension, or params.task under 2025-11-25.",
				t.Backend, t.SyncBudget, t.Name), nil
		}
		wait := min(b.pollInterval(task), time.Second, deadline.Sub(b.opts.Now()))
		select {
		case <-ctx.Done():
			b.cancelAtDeadline(task, id, deadline)
			return nil, requestCancelled("the job goes on until the call's budget ends; call again with the same idempotency key to get its result")
		case <-time.After(max(wait, 10*time.Millisecond)):
		}
	}
}

// cancelAtDeadline cancels, on the bridge's lifetime, the task of an
// idempotent synchronous call whose caller left, once the call's budget
// ends, unless it ended first.
func (b *Bridge) cancelAtDeadline(task *mapping.Task, id string, deadline time.Time) {
	b.goBackground(func() {
		select {
		case <-b.ctx.Done():
			return
		case <-time.After(deadline.Sub(b.opts.Now())):
		}
		ctx := withRevision(withPrincipal(b.ctx, task.Principal), revisionLegacy)
		if _, err := b.tasksCancel(ctx, nil, &taskParams{TaskID: id}); err != nil {
			b.log.Warn("cancelling an abandoned idempotent call", "task", shortKey(task.Key), "error", err)
		}
	})
}

// syncOutcome is what a synchronous call answers for a terminal task: its
// result, or its JSON-RPC error.
func syncOutcome(t *mapping.Task) (*mcp.CallToolResult, error) {
	var o outcome
	json.Unmarshal(t.Outcome, &o)
	if t.Status == mapping.StatusFailed {
		if o.Error == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: t.StatusMessage}
		}
		return nil, &jsonrpc.Error{Code: int64(o.Error.Code), Message: o.Error.Message}
	}
	raw := o.Result
	if len(raw) == 0 {
		raw = toolResultText(t.StatusMessage, t.Status == mapping.StatusCancelled)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, internalError("reading the stored result: %v", err)
	}
	return &res, nil
}
