package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/jobbridge/jobbridge/auth"
)

// checkRequest guards the MCP endpoint before the SDK sees a request:
//   - a 2026-07-28 tasks/get, tasks/update or tasks/cancel must carry
//     Mcp-Name equal to params.taskId (HTTP 400, JSON-RPC -32020 otherwise);
//     2025-11-25 requests, which never carry it, are not checked;
//   - a tools/call's params.task (2025-11-25) is moved into its _meta, where
//     the bridge reads it (see moveTaskParam);
//   - an initialize that negotiates 2025-11-25 is marked for the session
//     handler;
//   - a principal sending tasks/* requests faster than the gets_per_second
//     limit gets HTTP 429 with Retry-After and a JSON-RPC error (the task
//     itself is unaffected);
//   - with authentication, a tools/call of a tool whose policy names scopes
//     the caller lacks gets HTTP 403 insufficient_scope naming them.
//
// Other requests pass through untouched; the SDK checks the headers of
// standard methods itself.
func (b *Bridge) checkRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		limit := b.limits.MaxRequestBytes
		body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil || int64(len(body)) > limit {
			if int64(len(body)) > limit {
				b.metrics.reject("request_size")
			}
			next.ServeHTTP(w, r) // the SDK reports the oversized or broken body
			return
		}
		// Field names are matched exactly, as the SDK matches them:
		// encoding/json would also take "taskid" or "TASKID", and a decoy key
		// could then pass this check while the handler acts on another task.
		var msg struct {
			ID     json.RawMessage            `json:"id"`
			Method string                     `json:"method"`
			Params map[string]json.RawMessage `json:"params"`
		}
		if json.Unmarshal(body, &msg) != nil {
			next.ServeHTTP(w, r)
			return
		}
		taskID, hasTaskID := exactString(msg.Params, "taskId")
		toolName, _ := exactString(msg.Params, "name")
		caller, _ := auth.PrincipalFrom(r.Context())
		modern := bodyIsModern(msg.Params)
		switch msg.Method {
		case "initialize":
			// A client that negotiates 2025-11-25 gets a session: its
			// revision has server-to-client requests (input relayed through
			// tasks/result) and remembers the capabilities of initialize.
			if v, _ := exactString(msg.Params, "protocolVersion"); v != "" && v < modernProtocol {
				r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, true))
			}
		case "tools/call":
			// params.task (2025-11-25) reaches the bridge in _meta.
			if rewritten, changed := rewriteTaskParam(body); changed {
				r.Body = io.NopCloser(bytes.NewReader(rewritten))
				r.ContentLength = int64(len(rewritten))
			}
		}
		if msg.Method == "subscriptions/listen" && len(msg.ID) > 0 {
			params, _ := json.Marshal(msg.Params)
			if req, named, err := parseListen(msg.ID, params); named {
				if err != nil {
					writeRPCError(w, msg.ID, err)
					return
				}
				b.serveListenHTTP(w, r, req)
				return
			}
		}
		switch msg.Method {
		case "tasks/get", "tasks/update", "tasks/cancel", "tasks/list", "tasks/result":
			if msg.Method != "tasks/list" && !hasTaskID {
				break // malformed params: the handler answers -32602
			}
			// Mcp-Name is a 2026-07-28 header; 2025-11-25 clients never
			// send it.
			// tasks/list and tasks/result are not 2026-07-28 methods at all
			// (the handler answers -32601).
			nameChecked := msg.Method != "tasks/list" && msg.Method != "tasks/result"
			if name, ok := headerValue(r.Header, "Mcp-Name"); modern && nameChecked && (!ok || name != taskID) {
				reason := "Mcp-Name header does not match params.taskId"
				if !ok {
					reason = "Mcp-Name header is required on " + msg.Method
				}
				writeHeaderMismatch(w, msg.ID, reason)
				return
			}
			key := b.opts.HTTPPrincipal
			if caller != nil {
				key = principalKeyOf(caller)
			}
			if wait, ok := b.rates.allowPoll(key, b.limits.GetsPerSecond); !ok {
				b.metrics.reject("poll_rate")
				secs := max(1, int(wait.Round(time.Second)/time.Second))
				w.Header().Set("Retry-After", strconv.Itoa(secs))
				writeJSONError(w, http.StatusTooManyRequests, msg.ID, jsonrpc.CodeInternalError,
					fmt.Sprintf("too many tasks requests: poll at the task's poll interval; try again in %ds", secs))
				return
			}
		case "tools/call":
			t := b.toolNamed(toolName)
			if caller == nil || t == nil || t.Allow == nil || b.opts.Auth == nil {
				break
			}
			if missing := missingScopes(t, caller); len(missing) > 0 && t.Allow.Allows(caller.ID, caller.Groups, t.Allow.Scopes) {
				b.metrics.reject("scope")
				b.opts.Auth.Forbidden(w, t.Allow.Scopes)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// bodyIsModern reports whether a request's params._meta says protocol
// 2026-07-28 or later (the key matched exactly, as the SDK matches it).
func bodyIsModern(params map[string]json.RawMessage) bool {
	var meta map[string]json.RawMessage
	if raw, ok := params["_meta"]; !ok || json.Unmarshal(raw, &meta) != nil {
		return false
	}
	v, _ := exactString(meta, mcp.MetaKeyProtocolVersion)
	return v >= modernProtocol
}

// rewriteTaskParam applies moveTaskParam to an HTTP request body.
func rewriteTaskParam(body []byte) ([]byte, bool) {
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil {
		return body, false
	}
	params, changed := moveTaskParam(msg["params"])
	if !changed {
		return body, false
	}
	msg["params"] = params
	out, err := json.Marshal(msg)
	if err != nil {
		return body, false
	}
	return out, true
}

// sessionKey marks an HTTP request the session handler serves.
type sessionKey struct{}

// exactString returns the string value of params[key], with the key matched
// exactly.
func exactString(params map[string]json.RawMessage, key string) (string, bool) {
	raw, ok := params[key]
	if !ok || string(raw) == "null" {
		return "", false
	}
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	return v, true
}

// missingScopes lists the scopes of the tool's policy the caller lacks.
func missingScopes(t *tool, p *auth.Principal) []string {
	var missing []string
	for _, s := range t.Allow.Scopes {
		if !slices.Contains(p.Scopes, s) {
			missing = append(missing, s)
		}
	}
	return missing
}

// rateLimits keeps a token bucket per principal for polls. It is per
// process: with N replicas a principal may reach N times the rate, since a
// count shared through the store would cost a write per tasks/get. (The
// creation rate limit is the store's, shared by all replicas: see
// mapping.CreateLimits.)
type rateLimits struct {
	mu    sync.Mutex
	polls map[string]*rate.Limiter
}

func newRateLimits() *rateLimits {
	return &rateLimits{polls: map[string]*rate.Limiter{}}
}

// maxTracked bounds the number of principals remembered; past it the buckets
// start afresh (everyone gets a full bucket again), which keeps memory
// bounded under a flood of identities.
const maxTracked = 10_000

func (l *rateLimits) limiter(m map[string]*rate.Limiter, key string, r rate.Limit, burst int) *rate.Limiter {
	lim, ok := m[key]
	if !ok {
		if len(m) >= maxTracked {
			clear(m)
		}
		lim = rate.NewLimiter(r, burst)
		m[key] = lim
	}
	return lim
}

// allowPoll takes one tasks/* request from the principal's bucket (perSecond,
// burst twice that); when empty it says how long to wait.
func (l *rateLimits) allowPoll(key string, perSecond int) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.limiter(l.polls, key, rate.Limit(perSecond), 2*perSecond)
	if lim.Allow() {
		return 0, true
	}
	return time.Duration(float64(time.Second) / float64(perSecond)), false
}
