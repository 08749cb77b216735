package catalog

import (
	"errors"
	"fmt"
	"time"

	"github.com/jobbridge/jobbridge/adapters/expr"
)

// How a tool's calls are answered beyond the task mode: idempotency keys
// and quick jobs answered inline. docs/calls.md describes both.

// Calls are a tool's call options.
type Calls struct {
	// IdempotencyKey, when set, derives each call's idempotency key from its
	// arguments ({args.NAME} placeholders and {= EXPR} expressions over
	// args): a second call with the same key from the same caller gets the
	// first call's task instead of a second job. A key the caller sends in
	// _meta["jobbridge/idempotencyKey"] takes precedence.
	IdempotencyKey *expr.Template
	// IdempotencyKeySource is the template as written.
	IdempotencyKeySource string
	// IdempotencyWindow is how long after its task ended a key still names
	// it (never longer than the task is kept: its ttl). Zero when the tool
	// sets none: Window then gives DefaultIdempotencyWindow.
	IdempotencyWindow time.Duration
	// InlineWithin, when positive, is how long a call that may become a task
	// waits for its job to end: a job that ends within it is answered with
	// its result inline, one that does not with the task, as without it.
	InlineWithin time.Duration
}

// Window is how long after its task ended an idempotency key still names
// it: IdempotencyWindow, or DefaultIdempotencyWindow when unset.
func (c Calls) Window() time.Duration {
	if c.IdempotencyWindow > 0 {
		return c.IdempotencyWindow
	}
	return DefaultIdempotencyWindow
}

// DefaultIdempotencyWindow is a tool's idempotency_window unless it sets one.
const DefaultIdempotencyWindow = 24 * time.Hour

// MaxInlineWithin bounds inline_within: a client waits that long for the
// answer to a call that could have been a task at once.
const MaxInlineWithin = 10 * time.Second

// callSettings are the keys of a tool entry that set its Calls.
type callSettings struct {
	// IdempotencyKey is a template over the arguments (`{args.NAME}`)
	// whose value keys the call: a second call of the same principal with
	// the same key gets the first call's task (or its stored result),
	// never a second job; with other arguments it is refused. A key in the
	// request's _meta (jobbridge/idempotencyKey) takes precedence.
	IdempotencyKey *string `yaml:"idempotency_key"`
	// IdempotencyWindow is how long after its task ended a key still
	// returns that task. Default 24h.
	IdempotencyWindow *time.Duration `yaml:"idempotency_window"`
	// InlineWithin is how long a task-capable call waits for its job
	// before it answers with the task: a job that ends within it is
	// answered inline, as an ordinary tool result. At most 10s and less
	// than sync_budget; not with task: never. Default: off.
	InlineWithin *time.Duration `yaml:"inline_within"`
}

// idempotencyScope is what an idempotency_key template may use: the call's
// arguments only (the key is computed before anything else exists).
var idempotencyScope = expr.Scope{
	Vars: []string{expr.Args},
	Missing: map[string]string{
		expr.CorrelationID: "an idempotency key is computed before the submission has one",
		expr.Job:           "an idempotency key is computed before the job exists",
		expr.Answers:       "an idempotency key is computed before any input is asked for",
	},
}

// calls checks a tool entry's call settings at path (the tool's path) and
// returns its Calls. mode is the tool's task mode, syncBudget its budget.
func (l *loader) calls(path string, s callSettings, mode TaskMode, syncBudget time.Duration) Calls {
	var c Calls
	if s.IdempotencyKey != nil {
		p := path + ".idempotency_key"
		tmpl, err := expr.ParseTemplate(*s.IdempotencyKey, idempotencyScope)
		switch {
		case l.decodeFailed(p):
		case err != nil:
			l.invalid(p, err)
		case tmpl.IsZero():
			l.invalid(p, errors.New("must not be empty: write a template over the arguments, such as \"{args.release}\""))
		default:
			if _, literal := tmpl.Literal(); literal {
				l.invalid(p, errors.New("has no placeholder: every call would share one key, and only the first would ever run; use {args.NAME}"))
				break
			}
			c.IdempotencyKey, c.IdempotencyKeySource = &tmpl, *s.IdempotencyKey
		}
	}
	if s.IdempotencyWindow != nil {
		p := path + ".idempotency_window"
		switch w := *s.IdempotencyWindow; {
		case l.decodeFailed(p):
		case w <= 0:
			l.invalid(p, errors.New("must be positive"))
		case w > MaxTTL:
			l.invalid(p, errors.New("must be at most 720h (30 days)"))
		default:
			c.IdempotencyWindow = w
		}
	}
	if s.InlineWithin != nil {
		p := path + ".inline_within"
		switch d := *s.InlineWithin; {
		case l.decodeFailed(p):
		case d <= 0:
			l.invalid(p, errors.New("must be positive"))
		case d > MaxInlineWithin:
			l.invalid(p, fmt.Errorf("must be at most %s: a client waits that long for an answer it could have had at once as a task", MaxInlineWithin))
		case mode == TaskNever:
			l.invalid(p, errors.New("applies only to calls that can become tasks, and this tool's task mode is never (its calls always wait, within sync_budget)"))
		case d >= syncBudget:
			l.invalid(p, fmt.Errorf("must be shorter than sync_budget %s", syncBudget))
		default:
			c.InlineWithin = d
		}
	}
	return c
}
