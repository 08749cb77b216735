package lifecycle

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
)

// A Gate paces the calls jobbridge makes to one backend; every task on the
// backend shares it, so that a sick or throttling backend is asked less,
// never more, than in calm weather:
//
//   - A throttling answer (an error wrapping [adapters.ErrThrottled]) pauses
//     every call for as long as the backend asked (its Retry-After), or, when
//     it did not say, for an exponentially growing pause with jitter.
//   - After breakerThreshold consecutive failures (the backend could not be
//     asked: refused connections, timeouts, 5xx after the adapter's own
//     retries) the breaker opens: calls pause with exponential backoff and
//     jitter, up to breakerMaxPause. When the pause ends one probe call is let
//     through; its success closes the breaker, its failure doubles the pause.
//
// While a gate is closed, tasks/get answers from the last observation and
// says why in the status message.
type Gate struct {
	backend string
	now     func() time.Time

	mu        sync.Mutex
	until     time.Time // no call before this
	reason    string    // why calls are paused, for status messages
	failures  int       // consecutive failures
	throttles int       // consecutive throttling answers
	probing   bool      // a half-open probe is in flight
}

const (
	breakerThreshold = 3
	breakerBasePause = time.Second
	breakerMaxPause  = time.Minute
	// throttleBasePause is the first pause after a throttling answer that
	// did not say how long to wait.
	throttleBasePause = 5 * time.Second
)

// NewGate returns the gate of the backend called backend.
func NewGate(backend string, now func() time.Time) *Gate {
	return &Gate{backend: backend, now: now}
}

// Allow reports whether a call may be made now. When it may not, it says
// until when calls are paused and why. A call allowed while the breaker is
// half open is the probe: its outcome must be reported with Done.
func (g *Gate) Allow() (ok bool, until time.Time, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if now.Before(g.until) {
		return false, g.until, g.reason
	}
	if g.failures >= breakerThreshold {
		if g.probing {
			return false, now.Add(breakerBasePause), g.reason
		}
		g.probing = true
	}
	return true, time.Time{}, ""
}

// Paused reports whether calls are paused now, until when and why.
func (g *Gate) Paused() (until time.Time, reason string, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.now().Before(g.until) {
		return g.until, g.reason, true
	}
	return time.Time{}, "", false
}

// Done records the outcome of an allowed call: nil when the backend
// answered (whatever it said about the job), else the call's error.
func (g *Gate) Done(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.probing = false
	now := g.now()
	if d, ok := adapters.RetryAfter(err); ok {
		g.throttles++
		if d <= 0 {
			d = Jitter(Backoff(throttleBasePause, g.throttles, breakerMaxPause))
		}
		g.pause(now, d, fmt.Sprintf("the backend %q is throttling requests", g.backend))
		return
	}
	if err == nil || errors.Is(err, ErrNotBackendFault) {
		g.failures, g.throttles = 0, 0
		return
	}
	g.throttles = 0
	g.failures++
	if g.failures >= breakerThreshold {
		d := Jitter(Backoff(breakerBasePause, g.failures-breakerThreshold+1, breakerMaxPause))
		g.pause(now, d, fmt.Sprintf("the backend %q is failing (%d calls in a row)", g.backend, g.failures))
	}
}

func (g *Gate) pause(now time.Time, d time.Duration, reason string) {
	if until := now.Add(d); until.After(g.until) {
		g.until = until
	}
	g.reason = reason
}

// ErrNotBackendFault marks errors that say nothing about the backend's
// health (this process's own shutdown).
var ErrNotBackendFault = errors.New("not a backend fault")

// PauseNote is the status-message suffix that tells a caller why the task's
// state was not refreshed, or "" when calls are not paused.
func (g *Gate) PauseNote(now time.Time) string {
	until, reason, ok := g.Paused()
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s; next check in %s", reason, until.Sub(now).Round(time.Second))
}
