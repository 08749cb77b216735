package jobapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// Status values of the job document.
const (
	statusQueued       = "queued"
	statusRunning      = "running"
	statusWaitingInput = "waiting_input"
	statusSucceeded    = "succeeded"
	statusFailed       = "failed"
	statusError        = "error"
	statusCancelled    = "cancelled"
)

// Outcomes and cancel behaviours a script may ask for.
const (
	outcomeSuccess       = "success"
	outcomeToolError     = "tool_error"
	outcomeProtocolError = "protocol_error"

	onCancelCancel = "cancel"
	onCancelIgnore = "ignore"
	onCancelFinish = "finish"
	onCancelRefuse = "refuse"
)

// internalErrorCode is the JSON-RPC "internal error" code reported by a job
// with the protocol_error outcome.
const internalErrorCode = -32603

// maxSeconds bounds every duration in a script, well below what
// time.Duration can hold.
const maxSeconds = 1e8

// script is the body of POST /jobs.
type script struct {
	CorrelationID   string         `json:"correlation_id"`
	DurationSeconds float64        `json:"duration_seconds"`
	QueueSeconds    float64        `json:"queue_seconds"`
	AskAfterSeconds float64        `json:"ask_after_seconds"`
	Outcome         string         `json:"outcome"`
	Output          string         `json:"output"`
	Data            map[string]any `json:"data"`
	ErrorMessage    string         `json:"error_message"`
	Questions       []question     `json:"questions"`
	OnCancel        string         `json:"on_cancel"`
}

// question is a script's question, as also shown in the job document.
type question struct {
	Key     string         `json:"key"`
	Message string         `json:"message"`
	Schema  map[string]any `json:"schema,omitempty"`
}

// errInvalidJSON marks a body that is not a JSON object (answered 400);
// other decoding errors are bad values (answered 422).
var errInvalidJSON = errors.New("invalid JSON")

// decodeObject decodes a JSON object body into v, distinguishing malformed
// JSON (wrapping errInvalidJSON) from values of the wrong type.
func decodeObject(body []byte, v any) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return fmt.Errorf("%w: %w", errInvalidJSON, err)
	}
	if raw == nil {
		return fmt.Errorf("%w: body is not a JSON object", errInvalidJSON)
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("field %s: cannot use a JSON %s as %s", te.Field, te.Value, te.Type)
		}
		return err
	}
	return nil
}

// validate fills defaults and reports the first bad value.
func (s *script) validate() error {
	for _, d := range []struct {
		name string
		v    float64
	}{
		{"duration_seconds", s.DurationSeconds},
		{"queue_seconds", s.QueueSeconds},
		{"ask_after_seconds", s.AskAfterSeconds},
	} {
		if d.v < 0 || d.v > maxSeconds {
			return fmt.Errorf("%s: must be between 0 and %g, got %g", d.name, float64(maxSeconds), d.v)
		}
	}
	switch s.Outcome {
	case "":
		s.Outcome = outcomeSuccess
	case outcomeSuccess, outcomeToolError, outcomeProtocolError:
	default:
		return fmt.Errorf("outcome: unknown value %q (want success, tool_error or protocol_error)", s.Outcome)
	}
	switch s.OnCancel {
	case "":
		s.OnCancel = onCancelCancel
	case onCancelCancel, onCancelIgnore, onCancelFinish, onCancelRefuse:
	default:
		return fmt.Errorf("on_cancel: unknown value %q (want cancel, ignore, finish or refuse)", s.OnCancel)
	}
	seen := make(map[string]bool, len(s.Questions))
	for i, q := range s.Questions {
		if q.Key == "" {
			return fmt.Errorf("questions[%d].key: required", i)
		}
		if seen[q.Key] {
			return fmt.Errorf("questions[%d].key: %q is repeated", i, q.Key)
		}
		seen[q.Key] = true
	}
	return nil
}

// job is one submitted job. Its state is derived from the clock and the
// events recorded here (answers, an ending caused by a request).
type job struct {
	id        string
	seq       int
	idemKey   string
	script    script
	createdAt time.Time

	// answered holds the keys answered "accept".
	answered map[string]bool
	// answeredAt is when the last outstanding question was answered; zero
	// until then.
	answeredAt time.Time
	// ended, when set, is the final state reached through a request (a
	// cancel or a declined question) rather than through time.
	ended *state

	// sent is set once a callback has reported the job, sentKey is the
	// state it reported (status and outstanding questions), deliveries
	// counts its callbacks.
	sent       bool
	sentKey    string
	deliveries int
}

// state is the observable state of a job at one instant.
type state struct {
	status     string
	message    string
	progress   *progress
	questions  []question
	result     *result
	err        *jobError
	finishedAt time.Time
}

func (st state) finished() bool { return !st.finishedAt.IsZero() }

type progress struct {
	Done  float64 `json:"done"`
	Total float64 `json:"total"`
}

type result struct {
	Text string         `json:"text"`
	Data map[string]any `json:"data,omitempty"`
}

type jobError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// seconds converts a script duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// stateAt computes the job's state at now.
func (j *job) stateAt(now time.Time) state {
	if j.ended != nil {
		return *j.ended
	}
	sc := &j.script
	runAt := j.createdAt.Add(seconds(sc.QueueSeconds))
	if now.Before(runAt) {
		return state{status: statusQueued, message: "queued"}
	}
	total := sc.DurationSeconds
	if len(sc.Questions) == 0 {
		runEnd := runAt.Add(seconds(sc.DurationSeconds))
		if now.Before(runEnd) {
			return running(now.Sub(runAt), total)
		}
		return j.outcome(runEnd)
	}
	total += sc.AskAfterSeconds
	askAt := runAt.Add(seconds(sc.AskAfterSeconds))
	if now.Before(askAt) {
		return running(now.Sub(runAt), total)
	}
	if j.answeredAt.IsZero() {
		return state{
			status:    statusWaitingInput,
			message:   "waiting for input",
			progress:  newProgress(seconds(sc.AskAfterSeconds), total),
			questions: j.outstanding(),
		}
	}
	runEnd := j.answeredAt.Add(seconds(sc.DurationSeconds))
	if now.Before(runEnd) {
		return running(seconds(sc.AskAfterSeconds)+now.Sub(j.answeredAt), total)
	}
	return j.outcome(runEnd)
}

func running(done time.Duration, total float64) state {
	return state{status: statusRunning, message: "running", progress: newProgress(done, total)}
}

func newProgress(done time.Duration, total float64) *progress {
	return &progress{Done: math.Round(done.Seconds()*1000) / 1000, Total: total}
}

// outcome is the state of a job that ran to its end at the given time.
func (j *job) outcome(at time.Time) state {
	sc := &j.script
	switch sc.Outcome {
	case outcomeToolError:
		msg := sc.ErrorMessage
		if msg == "" {
			msg = "job " + j.id + " failed"
		}
		return state{status: statusFailed, message: msg, result: j.result(), finishedAt: at}
	case outcomeProtocolError:
		msg := sc.ErrorMessage
		if msg == "" {
			msg = "job " + j.id + " failed with an internal error"
		}
		return state{status: statusError, message: msg, err: &jobError{Code: internalErrorCode, Message: msg}, finishedAt: at}
	}
	return j.succeeded(at, "finished")
}

func (j *job) succeeded(at time.Time, message string) state {
	return state{status: statusSucceeded, message: message, result: j.result(), finishedAt: at}
}

func (j *job) result() *result {
	text := j.script.Output
	if text == "" {
		text = "job " + j.id + " finished"
	}
	return &result{Text: text, Data: j.script.Data}
}

// outstanding returns the questions not yet answered, in script order.
func (j *job) outstanding() []question {
	var qs []question
	for _, q := range j.script.Questions {
		if !j.answered[q.Key] {
			qs = append(qs, q)
		}
	}
	return qs
}

// cancel applies the job's on_cancel behaviour at now. The caller has checked
// that the job has not finished.
func (j *job) cancel(now time.Time) {
	switch j.script.OnCancel {
	case onCancelIgnore:
	case onCancelFinish:
		st := j.succeeded(now, "finished early on cancel")
		j.ended = &st
	default:
		j.ended = &state{status: statusCancelled, message: "cancelled", finishedAt: now}
	}
}

// answer applies answers at now. Answers to keys that are not outstanding are
// ignored. The caller has checked that the job has not finished.
func (j *job) answer(now time.Time, answers map[string]answer) {
	if j.stateAt(now).status != statusWaitingInput {
		return
	}
	for _, q := range j.outstanding() {
		a, ok := answers[q.Key]
		if !ok {
			continue
		}
		if a.Action != actionAccept {
			j.ended = &state{status: statusCancelled, message: "declined by user", finishedAt: now}
			return
		}
		j.answered[q.Key] = true
	}
	if len(j.outstanding()) == 0 {
		j.answeredAt = now
	}
}

// Answer actions.
const (
	actionAccept  = "accept"
	actionDecline = "decline"
	actionCancel  = "cancel"
)

// answer is one entry of the POST /jobs/<id>/answers body.
type answer struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content"`
}

// answersBody is the body of POST /jobs/<id>/answers.
type answersBody struct {
	Answers map[string]answer `json:"answers"`
}

func (b *answersBody) validate() error {
	if b.Answers == nil {
		return errors.New("answers: required")
	}
	for key, a := range b.Answers {
		switch a.Action {
		case actionAccept, actionDecline, actionCancel:
		default:
			return fmt.Errorf("answers.%s.action: unknown value %q (want accept, decline or cancel)", key, a.Action)
		}
	}
	return nil
}

// jobDocument is the wire form of a job.
type jobDocument struct {
	ID            string     `json:"id"`
	Status        string     `json:"status"`
	Message       string     `json:"message"`
	CorrelationID string     `json:"correlation_id,omitempty"`
	Progress      *progress  `json:"progress,omitempty"`
	Questions     []question `json:"questions,omitempty"`
	Result        *result    `json:"result,omitempty"`
	Error         *jobError  `json:"error,omitempty"`
	CreatedAt     string     `json:"created_at"`
	FinishedAt    string     `json:"finished_at,omitempty"`
}

func (j *job) document(now time.Time) jobDocument {
	st := j.stateAt(now)
	d := jobDocument{
		ID:            j.id,
		Status:        st.status,
		Message:       st.message,
		CorrelationID: j.script.CorrelationID,
		Progress:      st.progress,
		Questions:     st.questions,
		Result:        st.result,
		Error:         st.err,
		CreatedAt:     j.createdAt.UTC().Format(time.RFC3339Nano),
	}
	if st.finished() {
		d.FinishedAt = st.finishedAt.UTC().Format(time.RFC3339Nano)
	}
	return d
}
