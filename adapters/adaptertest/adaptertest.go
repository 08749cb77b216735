// Package adaptertest is the contract suite every adapter runs against a
// local fake of its backend: start, batched polls, the mapping of finished
// jobs onto states and their finishing times, not-found reporting,
// throttling, how failed calls are reported (adapters.CallError),
// cancellation (of running and of finished jobs), and the
// optional Responder and Finder interfaces, including the Finder rule that
// a search within the backend's listing lag never concludes "not found".
//
// An adapter's test calls [Run] with a [Harness] that knows how to make the
// fake backend run a job of each [JobKind]. Checks that need something the
// harness or adapter does not offer are left out with a log line; they never
// count as passes.
package adaptertest

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobbridge/jobbridge/adapters"
)

// JobKind is a kind of job the harness can make the backend run.
type JobKind int

const (
	// Succeeds finishes successfully, soon.
	Succeeds JobKind = iota + 1
	// FailsWithToolError runs and fails, soon (a tool error, not a failure of
	// the bridge or protocol).
	FailsWithToolError
	// RunsLong keeps running well past the suite's timeout unless cancelled,
	// and stops when cancelled.
	RunsLong
	// AsksQuestion asks the user at least one question soon after it starts
	// (input_required) and succeeds soon after every question is answered.
	AsksQuestion
)

func (k JobKind) String() string {
	switch k {
	case Succeeds:
		return "Succeeds"
	case FailsWithToolError:
		return "FailsWithToolError"
	case RunsLong:
		return "RunsLong"
	case AsksQuestion:
		return "AsksQuestion"
	}
	return fmt.Sprintf("JobKind(%d)", int(k))
}

// Harness is what an adapter's test provides.
type Harness struct {
	// New returns the adapter under test, talking to the fake backend.
	// Required.
	New func(t *testing.T) adapters.Adapter
	// Job returns a request that makes the backend run a job of the kind, or
	// false when the backend cannot. Required; the suite sets
	// CorrelationID to a fresh value on every request.
	Job func(kind JobKind) (adapters.StartRequest, bool)
	// Purge, when set, makes the backend forget the job, as after its
	// retention ends.
	Purge func(t *testing.T, ref adapters.JobRef)
	// Answer, when set, answers a question the backend asked. Default:
	// accept with empty content.
	Answer func(key string, req adapters.InputRequest) adapters.Answer
	// Throttle, when set, makes the backend refuse every request for
	// throttling (an HTTP 429 or the backend's equivalent), asking callers
	// to wait d (a whole number of seconds), until the returned function is
	// called. Without it the throttling checks are left out.
	Throttle func(t *testing.T, d time.Duration) (stop func())
	// Fail, when set, makes the backend answer every request with its own
	// error answer of the given HTTP status (500, 403), until the returned
	// function is called. Without it the Problems check is left out.
	Fail func(t *testing.T, status int) (stop func())
	// Now is the backend's clock, against which the suite checks
	// Observation.FinishedAt. Default time.Now.
	Now func() time.Time
	// ListingLag, when positive, is the listing lag the adapter from New is
	// configured with, and says that the fake backend lists a new job only
	// some time after it accepted it (as the real backend does). The FindLag
	// check then makes sure that Find right after a Start never reports
	// "not found" (it finds the job or says adapters.ErrNotListedYet), and
	// that Find with a SubmittedAt older than the lag reports a job that
	// never existed as not found. Zero: FindLag is left out.
	ListingLag time.Duration
	// PollInterval is how often the suite polls while waiting. Default 20ms.
	PollInterval time.Duration
	// Timeout bounds each wait for a state. Default 30s.
	Timeout time.Duration
}

// Run runs the contract suite as subtests of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil || h.Job == nil {
		t.Fatal("adaptertest: Harness.New and Harness.Job are required")
	}
	if h.PollInterval <= 0 {
		h.PollInterval = 20 * time.Millisecond
	}
	if h.Timeout <= 0 {
		h.Timeout = 30 * time.Second
	}
	if h.Now == nil {
		h.Now = time.Now
	}
	s := &suite{h: h}

	t.Run("PollNothing", s.pollNothing)
	for _, c := range []struct {
		kind JobKind
		want adapters.State
	}{
		{Succeeds, adapters.StateSucceeded},
		{FailsWithToolError, adapters.StateToolError},
	} {
		if s.supports(t, c.kind) {
			t.Run("Finishes/"+c.kind.String(), func(t *testing.T) { s.finishes(t, c.kind, c.want) })
		}
	}
	if s.supports(t, Succeeds) && s.supports(t, FailsWithToolError) {
		t.Run("PollBatch", s.pollBatch)
	}
	if h.Purge != nil && s.supports(t, Succeeds) {
		t.Run("PurgedJobNotFound", s.purged)
	} else {
		t.Log("adaptertest: no Harness.Purge; not checking ErrJobNotFound")
	}
	if s.supports(t, RunsLong) {
		t.Run("CancelRunning", s.cancelRunning)
	}
	if s.supports(t, Succeeds) {
		t.Run("CancelFinished", s.cancelFinished)
	}
	if s.supports(t, FailsWithToolError) {
		t.Run("CancelAfterToolError", s.cancelAfterToolError)
	}
	if h.Throttle == nil {
		t.Log("adaptertest: no Harness.Throttle; not checking how throttling is reported")
	} else if s.supports(t, Succeeds) {
		t.Run("Throttled", s.throttled)
	}

	if h.Fail == nil {
		t.Log("adaptertest: no Harness.Fail; not checking how failed calls are reported")
	} else if s.supports(t, Succeeds) {
		t.Run("Problems", s.problems)
	}

	probe := h.New(t)
	if _, ok := probe.(adapters.Responder); ok && s.supports(t, AsksQuestion) {
		t.Run("Respond", s.respond)
	} else if !ok {
		t.Log("adaptertest: adapter is not a Responder; not checking Respond")
	}
	if f, ok := probe.(adapters.Finder); !ok {
		t.Log("adaptertest: adapter is not a Finder; not checking Find")
	} else if s.supports(t, Succeeds) {
		// A Finder may not support the harness's tool; ask once.
		_, _, err := f.Find(t.Context(), s.request(t, Succeeds))
		if errors.Is(err, errors.ErrUnsupported) {
			t.Logf("adaptertest: Find is unsupported for the harness's tool (%v); not checking it", err)
		} else {
			t.Run("Find", s.find)
			if h.ListingLag > 0 {
				t.Run("FindLag", s.findLag)
			} else {
				t.Log("adaptertest: no Harness.ListingLag; not checking that Find honours the listing lag")
			}
		}
	}
}

type suite struct {
	h Harness
}

func (s *suite) supports(t *testing.T, kind JobKind) bool {
	t.Helper()
	if _, ok := s.h.Job(kind); !ok {
		t.Logf("adaptertest: the backend cannot run a %s job; skipping the checks that need one", kind)
		return false
	}
	return true
}

// request returns a request for kind with a fresh correlation ID.
func (s *suite) request(t *testing.T, kind JobKind) adapters.StartRequest {
	t.Helper()
	req, ok := s.h.Job(kind)
	if !ok {
		t.Fatalf("Harness.Job(%s) reported no such job after reporting one", kind)
	}
	req.CorrelationID = "adaptertest-" + rand.Text()
	return req
}

// start starts a job of kind and checks the reference.
func (s *suite) start(t *testing.T, a adapters.Adapter, kind JobKind) (adapters.JobRef, adapters.StartRequest) {
	t.Helper()
	req := s.request(t, kind)
	ref, err := a.Start(t.Context(), req)
	if err != nil {
		t.Fatalf("Start(%s job): %v", kind, err)
	}
	checkRef(t, ref)
	return ref, req
}

func checkRef(t *testing.T, ref adapters.JobRef) {
	t.Helper()
	if ref.ID == "" {
		t.Errorf("JobRef.ID is empty")
	}
	if len(ref.Data) > 0 && !json.Valid(ref.Data) {
		t.Errorf("JobRef.Data is not valid JSON: %q", ref.Data)
	}
}

// poll polls refs once and checks the shape of the answer.
func (s *suite) poll(t *testing.T, a adapters.Adapter, refs ...adapters.JobRef) []adapters.Observation {
	t.Helper()
	obs, err := a.Poll(t.Context(), refs)
	if err != nil {
		t.Fatalf("Poll: %v", err)
	}
	if len(obs) != len(refs) {
		t.Fatalf("Poll of %d refs returned %d observations", len(refs), len(obs))
	}
	for i, o := range obs {
		if o.Err != nil {
			if diff := cmp.Diff(adapters.Observation{Err: o.Err}, o, cmp.Comparer(func(x, y error) bool { return x == y })); diff != "" {
				t.Errorf("observation %d has Err and other fields set (-want +got):\n%s", i, diff)
			}
			continue
		}
		if o.State < adapters.StateWorking || o.State > adapters.StateFailed {
			t.Errorf("observation %d has invalid state %v", i, o.State)
		}
	}
	return obs
}

// waitFor polls refs until done accepts the observations, and returns them.
func (s *suite) waitFor(t *testing.T, a adapters.Adapter, what string, done func([]adapters.Observation) bool, refs ...adapters.JobRef) []adapters.Observation {
	t.Helper()
	deadline := time.Now().Add(s.h.Timeout)
	for {
		obs := s.poll(t, a, refs...)
		if done(obs) {
			return obs
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after %v; last observations: %s", what, s.h.Timeout, describe(obs))
		}
		time.Sleep(s.h.PollInterval)
	}
}

// waitState waits until every ref is in its wanted state. An observation
// error fails the wait.
func (s *suite) waitState(t *testing.T, a adapters.Adapter, want []adapters.State, refs ...adapters.JobRef) []adapters.Observation {
	t.Helper()
	return s.waitFor(t, a, fmt.Sprint(want), func(obs []adapters.Observation) bool {
		ok := true
		for i, o := range obs {
			if o.Err != nil {
				t.Fatalf("observation %d: %v", i, o.Err)
			}
			if o.State.Terminal() && o.State != want[i] {
				t.Fatalf("observation %d reached %v, want %v: %s", i, o.State, want[i], describe(obs[i:i+1]))
			}
			ok = ok && o.State == want[i]
		}
		return ok
	}, refs...)
}

func describe(obs []adapters.Observation) string {
	s := ""
	for i, o := range obs {
		if i > 0 {
			s += "; "
		}
		if o.Err != nil {
			s += fmt.Sprintf("[%d] error: %v", i, o.Err)
			continue
		}
		s += fmt.Sprintf("[%d] %v %q", i, o.State, o.Message)
	}
	return s
}

func (s *suite) pollNothing(t *testing.T) {
	obs, err := s.h.New(t).Poll(t.Context(), nil)
	if err != nil {
		t.Fatalf("Poll(nil): %v", err)
	}
	if len(obs) != 0 {
		t.Errorf("Poll(nil) returned %d observations, want 0", len(obs))
	}
}

func (s *suite) finishes(t *testing.T, kind JobKind, want adapters.State) {
	a := s.h.New(t)
	before := s.h.Now()
	ref, _ := s.start(t, a, kind)
	o := s.waitState(t, a, []adapters.State{want}, ref)[0]
	seen := s.h.Now()
	if o.Result == nil || o.Result.Text == "" && o.Result.Structured == nil {
		t.Errorf("a %v observation has no result content: %+v", want, o)
	}
	if o.FinishedAt.IsZero() {
		t.Logf("adaptertest: the adapter reports no FinishedAt; not checking it")
		return
	}
	// Backends report seconds or milliseconds: allow for the truncation.
	if o.FinishedAt.Before(before.Add(-finishSlack)) || o.FinishedAt.After(seen) {
		t.Errorf("FinishedAt = %v, want between the start (%v) and the first terminal observation (%v)", o.FinishedAt, before, seen)
	}
}

// finishSlack allows for backends that report finishing times in whole
// seconds.
const finishSlack = 2 * time.Second

// cancelOK reports whether err is an acceptable answer to the cancel of a
// finished job: nil, or one wrapping adapters.ErrAlreadyFinished.
func cancelOK(err error) bool { return err == nil || errors.Is(err, adapters.ErrAlreadyFinished) }

// pollBatch polls jobs that end differently in one call, in both orders,
// and checks that each observation belongs to its ref.
func (s *suite) pollBatch(t *testing.T) {
	a := s.h.New(t)
	ok, _ := s.start(t, a, Succeeds)
	bad, _ := s.start(t, a, FailsWithToolError)
	ok2, _ := s.start(t, a, Succeeds)
	s.waitState(t, a, []adapters.State{adapters.StateSucceeded, adapters.StateToolError, adapters.StateSucceeded}, ok, bad, ok2)
	s.waitState(t, a, []adapters.State{adapters.StateToolError, adapters.StateSucceeded, adapters.StateToolError}, bad, ok, bad)
}

func (s *suite) purged(t *testing.T) {
	a := s.h.New(t)
	ref, _ := s.start(t, a, Succeeds)
	s.waitState(t, a, []adapters.State{adapters.StateSucceeded}, ref)
	s.h.Purge(t, ref)
	o := s.poll(t, a, ref)[0]
	if !errors.Is(o.Err, adapters.ErrJobNotFound) {
		t.Errorf("Poll of a purged job: Err = %v, want one wrapping adapters.ErrJobNotFound", o.Err)
	}
}

func (s *suite) cancelRunning(t *testing.T) {
	a := s.h.New(t)
	ref, _ := s.start(t, a, RunsLong)
	if o := s.poll(t, a, ref)[0]; o.Err != nil || o.State.Terminal() {
		t.Fatalf("a RunsLong job right after Start: %s", describe([]adapters.Observation{o}))
	}
	if err := a.Cancel(t.Context(), ref); err != nil {
		t.Fatalf("Cancel of a running job: %v", err)
	}
	s.waitState(t, a, []adapters.State{adapters.StateCancelled}, ref)
	if err := a.Cancel(t.Context(), ref); !cancelOK(err) {
		t.Errorf("Cancel of a cancelled job: %v, want nil or an error wrapping adapters.ErrAlreadyFinished", err)
	}
	s.waitState(t, a, []adapters.State{adapters.StateCancelled}, ref)
}

// cancelFinished cancels a job that succeeded: the cancel is not a failure
// (nil, or adapters.ErrAlreadyFinished), and the job stays succeeded.
func (s *suite) cancelFinished(t *testing.T) {
	a := s.h.New(t)
	ref, _ := s.start(t, a, Succeeds)
	s.waitState(t, a, []adapters.State{adapters.StateSucceeded}, ref)
	if err := a.Cancel(t.Context(), ref); !cancelOK(err) {
		t.Errorf("Cancel of a finished job: %v, want nil or an error wrapping adapters.ErrAlreadyFinished", err)
	}
	s.waitState(t, a, []adapters.State{adapters.StateSucceeded}, ref)
}

// cancelAfterToolError cancels a job that already failed on its own: the
// job's outcome stays a tool error, not a cancellation, and its finishing
// time stays before the cancel.
func (s *suite) cancelAfterToolError(t *testing.T) {
	a := s.h.New(t)
	ref, _ := s.start(t, a, FailsWithToolError)
	first := s.waitState(t, a, []adapters.State{adapters.StateToolError}, ref)[0]
	cancelAt := s.h.Now()
	if err := a.Cancel(t.Context(), ref); !cancelOK(err) {
		t.Errorf("Cancel of a job that failed: %v, want nil or an error wrapping adapters.ErrAlreadyFinished", err)
	}
	for i := range 2 {
		o := s.poll(t, a, ref)[0]
		if o.Err != nil || o.State != adapters.StateToolError {
			t.Fatalf("poll %d after cancelling a job that had failed: %s, want %v", i, describe([]adapters.Observation{o}), adapters.StateToolError)
		}
		if !o.FinishedAt.IsZero() && o.FinishedAt.After(cancelAt) {
			t.Errorf("poll %d after the cancel: FinishedAt %v is after the cancel (%v)", i, o.FinishedAt, cancelAt)
		}
		if !o.FinishedAt.Equal(first.FinishedAt) {
			t.Errorf("poll %d after the cancel: FinishedAt %v, before the cancel %v; want it unchanged", i, o.FinishedAt, first.FinishedAt)
		}
		time.Sleep(s.h.PollInterval)
	}
}

// throttleFor is the pause the throttled backend asks for.
const throttleFor = 7 * time.Second

// throttled checks how a throttling backend is reported: a Start error
// that wraps adapters.ErrThrottled with the pause asked for (and is no
// unknown outcome: no job was created), a Poll error (not only an
// observation's) wrapping it, and a Cancel error wrapping it.
func (s *suite) throttled(t *testing.T) {
	a := s.h.New(t)
	kind := Succeeds
	if _, ok := s.h.Job(RunsLong); ok {
		kind = RunsLong
	}
	ref, _ := s.start(t, a, kind)
	stop := s.h.Throttle(t, throttleFor)
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()

	req := s.request(t, Succeeds)
	if _, err := a.Start(t.Context(), req); err == nil {
		t.Errorf("Start while throttled succeeded")
	} else {
		d, ok := adapters.RetryAfter(err)
		switch {
		case !ok:
			t.Errorf("Start while throttled: %v, want an error wrapping adapters.ErrThrottled", err)
		case d < throttleFor-time.Second || d > throttleFor:
			t.Errorf("Start while throttled: RetryAfter = %v, want about %v (what the backend asked)", d, throttleFor)
		}
		if errors.Is(err, adapters.ErrOutcomeUnknown) || errors.Is(err, adapters.ErrJobUnaddressable) {
			t.Errorf("Start while throttled: %v; a throttled start created no job, so its outcome is known", err)
		}
	}

	obs, err := a.Poll(t.Context(), []adapters.JobRef{ref})
	if !errors.Is(err, adapters.ErrThrottled) {
		t.Errorf("Poll while throttled = %s, %v; want an error wrapping adapters.ErrThrottled, so that the bridge pauses the backend", describe(obs), err)
	} else if d, _ := adapters.RetryAfter(err); d <= 0 || d > throttleFor {
		t.Errorf("Poll while throttled: RetryAfter = %v, want up to %v", d, throttleFor)
	}

	if err := a.Cancel(t.Context(), ref); !errors.Is(err, adapters.ErrThrottled) {
		t.Errorf("Cancel while throttled = %v, want an error wrapping adapters.ErrThrottled", err)
	}

	stop()
	stopped = true
	// Submitted long ago, so that the adapter must answer, not wait for
	// its listing to catch up.
	req.SubmittedAt = s.longAgo()
	f, ok := s.h.New(t).(adapters.Finder)
	if !ok {
		t.Log("adaptertest: adapter is not a Finder; not checking that the throttled Start created no job")
		return
	}
	if _, found, err := f.Find(t.Context(), req); errors.Is(err, errors.ErrUnsupported) {
		t.Logf("adaptertest: Find is unsupported for the harness's tool (%v); not checking that the throttled Start created no job", err)
	} else if err != nil || found {
		t.Errorf("Find after a throttled Start = found %v, err %v; want not found: a throttled start creates no job", found, err)
	}
}

// problems checks how calls the backend answers with an error are
// reported, so that the caller can be told what the backend answered: a
// Poll yields (in the job's observation, or as the Poll's error) and a
// Cancel returns an [adapters.CallError] with the HTTP status, of class
// error for a 500 and refused for a 403, that does not claim the job
// finished or the backend was not reached.
func (s *suite) problems(t *testing.T) {
	for _, c := range []struct {
		status int
		class  adapters.ProblemClass
	}{
		{500, adapters.ProblemError},
		{403, adapters.ProblemRefused},
	} {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			a := s.h.New(t)
			kind := Succeeds
			if _, ok := s.h.Job(RunsLong); ok {
				kind = RunsLong
			}
			ref, _ := s.start(t, a, kind)
			stop := s.h.Fail(t, c.status)
			defer stop()

			obs, err := a.Poll(t.Context(), []adapters.JobRef{ref})
			if err == nil {
				if len(obs) != 1 {
					t.Fatalf("Poll of one job returned %d observations", len(obs))
				}
				err = obs[0].Err
			}
			checkProblem(t, "Poll", err, c.status, c.class)
			err = a.Cancel(t.Context(), ref)
			checkProblem(t, "Cancel", err, c.status, c.class)
			if errors.Is(err, adapters.ErrAlreadyFinished) {
				t.Errorf("Cancel answered %d = %v; an error answer does not say that the job finished", c.status, err)
			}
		})
	}
}

// checkProblem checks that err is an adapters.CallError of the class with
// the HTTP status, whose text gives the status.
func checkProblem(t *testing.T, what string, err error, status int, class adapters.ProblemClass) {
	t.Helper()
	if CheckProblem(t, what, err, class, status, nil) == nil {
		return
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("answered %d", status)) {
		t.Errorf("%s while the backend answers %d = %q, which does not say what the backend answered", what, status, err)
	}
}

// CheckProblem checks what an adapter reports for a call the backend
// answered with an error (or did not answer): that err is (or wraps) an
// [adapters.CallError] whose class and HTTP status are class and status,
// that wraps kind when kind is not nil, and that does not claim an
// unknown outcome (the backend answered, or the call was not sent). It
// returns the problem, or nil after reporting that err is none.
func CheckProblem(t *testing.T, what string, err error, class adapters.ProblemClass, status int, kind error) *adapters.CallError {
	t.Helper()
	var ce *adapters.CallError
	if !errors.As(err, &ce) {
		t.Errorf("%s = %v (%T), want an adapters.CallError", what, err, err)
		return nil
	}
	p := adapters.ProblemOf(err)
	if p.Class != class || p.Status != status {
		t.Errorf("%s = %q: class %q, status %d; want %q, %d", what, err, p.Class, p.Status, class, status)
	}
	if kind != nil && !errors.Is(err, kind) {
		t.Errorf("%s = %q, which does not wrap %v", what, err, kind)
	}
	if errors.Is(err, adapters.ErrOutcomeUnknown) {
		t.Errorf("%s = %q says its outcome is unknown, though the backend answered", what, err)
	}
	return p
}

func (s *suite) respond(t *testing.T) {
	a := s.h.New(t)
	r := a.(adapters.Responder)
	ref, _ := s.start(t, a, AsksQuestion)
	o := s.waitState(t, a, []adapters.State{adapters.StateInputRequired}, ref)[0]
	if len(o.InputRequests) == 0 {
		t.Fatalf("an input_required observation has no input requests: %+v", o)
	}
	answers := map[string]adapters.Answer{}
	for key, req := range o.InputRequests {
		if req.Message == "" {
			t.Errorf("input request %q has no message", key)
		}
		var schema map[string]any
		if err := json.Unmarshal(req.Schema, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("input request %q: schema %s is not a JSON object schema", key, req.Schema)
		}
		answers[key] = adapters.Answer{Action: "accept", Content: map[string]any{}}
		if s.h.Answer != nil {
			answers[key] = s.h.Answer(key, req)
		}
	}
	if err := r.Respond(t.Context(), ref, answers); err != nil {
		t.Fatalf("Respond: %v", err)
	}
	s.waitState(t, a, []adapters.State{adapters.StateSucceeded}, ref)
}

// longAgo is a submission time older than any listing lag.
func (s *suite) longAgo() time.Time {
	return s.h.Now().Add(-s.h.ListingLag - 24*time.Hour)
}

// findListed calls Find until the job is listed (while Find says
// adapters.ErrNotListedYet), within the suite's timeout.
func (s *suite) findListed(t *testing.T, f adapters.Finder, req adapters.StartRequest) (adapters.JobRef, bool, error) {
	t.Helper()
	deadline := time.Now().Add(s.h.Timeout)
	for {
		ref, found, err := f.Find(t.Context(), req)
		if !errors.Is(err, adapters.ErrNotListedYet) || time.Now().After(deadline) {
			return ref, found, err
		}
		if found {
			t.Errorf("Find = found %v with an error wrapping adapters.ErrNotListedYet (%v); want one or the other", ref.ID, err)
		}
		time.Sleep(s.h.PollInterval)
	}
}

func (s *suite) find(t *testing.T) {
	a := s.h.New(t)
	f := a.(adapters.Finder)
	ref, req := s.start(t, a, Succeeds)

	got, found, err := s.findListed(t, f, req)
	if err != nil || !found {
		t.Fatalf("Find(started job) = found %v, err %v; want found", found, err)
	}
	checkRef(t, got)
	if got.ID != ref.ID {
		t.Errorf("Find returned job %q, want %q", got.ID, ref.ID)
	}
	// The found reference addresses the same job.
	s.waitState(t, a, []adapters.State{adapters.StateSucceeded, adapters.StateSucceeded}, got, ref)

	unknown := s.request(t, Succeeds)
	unknown.SubmittedAt = s.longAgo()
	if _, found, err := f.Find(t.Context(), unknown); err != nil || found {
		t.Errorf("Find(never started, submitted long ago) = found %v, err %v; want not found, nil", found, err)
	}
}

// findLag checks the Finder rule for a backend whose listing lags: right
// after a Start, Find either finds the job or says it is not listed yet,
// never "not found"; so does a Find for a job never started whose
// submission is recent. Once the lag has passed since SubmittedAt, a job
// never started is not found.
func (s *suite) findLag(t *testing.T) {
	a := s.h.New(t)
	f := a.(adapters.Finder)
	ref, req := s.start(t, a, Succeeds)
	req.SubmittedAt = s.h.Now()
	got, found, err := f.Find(t.Context(), req)
	switch {
	case err == nil && !found:
		t.Errorf("Find right after Start = not found, nil; within the listing lag (%v) the adapter must not conclude the job does not exist: want found, or an error wrapping adapters.ErrNotListedYet", s.h.ListingLag)
	case err == nil && got.ID != ref.ID:
		t.Errorf("Find right after Start returned job %q, want %q", got.ID, ref.ID)
	case err != nil && !errors.Is(err, adapters.ErrNotListedYet):
		t.Errorf("Find right after Start: %v; want found, or an error wrapping adapters.ErrNotListedYet", err)
	case err != nil && found:
		t.Errorf("Find right after Start = found with error %v; want one or the other", err)
	}

	recent := s.request(t, Succeeds)
	recent.SubmittedAt = s.h.Now()
	if _, found, err := f.Find(t.Context(), recent); found || !errors.Is(err, adapters.ErrNotListedYet) {
		t.Errorf("Find(submitted just now, not listed) = found %v, err %v; want an error wrapping adapters.ErrNotListedYet", found, err)
	}
	recent.SubmittedAt = s.longAgo()
	if _, found, err := f.Find(t.Context(), recent); found || err != nil {
		t.Errorf("Find(submitted %v ago, never listed) = found %v, err %v; want not found, nil", s.h.ListingLag+24*time.Hour, found, err)
	}
}
