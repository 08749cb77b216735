package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/mapping"
)

// ConfirmKey is the input request key of a tool's confirmation: answer it
// with accept and {"confirm": true} to submit the job.
const ConfirmKey = "jobbridge.confirm"

// Input is an outstanding input request as kept in a task's row.
type Input struct {
	Message string          `json:"message"`
	Schema  json.RawMessage `json:"schema"`
	// Job marks a request that came from the backend (delivered through the
	// adapter's Responder) rather than the bridge's confirmation.
	Job bool `json:"job,omitempty"`
	// Since is when the request was first asked, for max_input_wait.
	Since time.Time `json:"since"`
	// Note says why the question is asked again (an answer that did not
	// confirm); shown before Message.
	Note string `json:"note,omitempty"`
}

// Prompt is the text the user is shown: the note, if any, then the
// question.
func (in Input) Prompt() string {
	if in.Note == "" {
		return in.Message
	}
	return in.Note + "\n\n" + in.Message
}

// EncodeInputs is the stored form of a task's input requests.
func EncodeInputs(m map[string]Input) json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	b, _ := json.Marshal(m)
	return b
}

// DecodeInputs reads a task's stored input requests.
func DecodeInputs(raw json.RawMessage) map[string]Input {
	m := map[string]Input{}
	if len(raw) > 0 {
		json.Unmarshal(raw, &m)
	}
	return m
}

// DecodeKeys reads a task's stored answered keys.
func DecodeKeys(raw json.RawMessage) []string {
	var keys []string
	if len(raw) > 0 {
		json.Unmarshal(raw, &keys)
	}
	return keys
}

func encodeKeys(keys []string) json.RawMessage {
	b, _ := json.Marshal(keys)
	return b
}

// Verdict is what an answer to a confirmation prompt says.
type Verdict int

const (
	// ConfirmUnclear: the answer confirms nothing; ask again.
	ConfirmUnclear Verdict = iota
	// ConfirmYes: submit the job.
	ConfirmYes
	// ConfirmNo: end the task, submitting nothing.
	ConfirmNo
)

// JudgeConfirmation reads an answer to a confirmation prompt. Only an
// accepted form whose confirm field is the boolean true confirms; a decline
// or a cancel ends the task; anything else (confirm missing, false, or not a
// boolean) confirms nothing and the question is asked again. why says, in
// words for the user, what the answer was taken to mean.
func JudgeConfirmation(a adapters.Answer) (Verdict, string) {
	switch a.Action {
	case "decline":
		return ConfirmNo, "the user declined the confirmation"
	case "cancel":
		return ConfirmNo, "the user dismissed the confirmation"
	}
	switch v, ok := a.Content["confirm"]; {
	case !ok:
		return ConfirmUnclear, "the answer did not say confirm: true (the box was not ticked); confirm to submit the job, or decline"
	case v == true:
		return ConfirmYes, ""
	case v == false:
		return ConfirmUnclear, "the answer said confirm: false; confirm to submit the job, or decline to cancel it"
	default:
		return ConfirmUnclear, fmt.Sprintf("confirm must be true or false, not %s; confirm to submit the job, or decline", jsonKind(v))
	}
}

// jsonKind names the JSON type of a decoded value, for messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// Answered is what Answer recorded.
type Answered struct {
	// Task is the row as written.
	Task *mapping.Task
	// Confirmed: the confirmation was given; the caller submits the job
	// with Args.
	Confirmed bool
	Args      map[string]any
	// Job holds the answers to the backend's questions, marked answered
	// (so delivered once); the caller delivers them.
	Job map[string]adapters.Answer
}

// Answer records the answers to a task's outstanding input requests. Keys
// that are not outstanding are ignored. A confirmation submits the job (the
// task moves to submitting), a decline ends it cancelled with no job, and an
// answer that confirms nothing keeps the question open, asked again with the
// reason. A task that ended is returned with ErrTerminal.
func (l *Lifecycle) Answer(task *mapping.Task, answers map[string]adapters.Answer) (Answered, error) {
	var a Answered
	u, err := l.mutate(task, func(t *mapping.Task, now time.Time) bool {
		a = Answered{Job: map[string]adapters.Answer{}}
		open := DecodeInputs(t.InputRequests)
		answered := DecodeKeys(t.AnsweredKeys)
		var confirm *adapters.Answer
		for key, ans := range answers {
			in, ok := open[key]
			if !ok || contains(answered, key) {
				continue
			}
			if in.Job {
				delete(open, key)
				answered = append(answered, key)
				a.Job[key] = ans
			} else if key == ConfirmKey {
				confirm = &ans
			}
		}
		if confirm == nil && len(a.Job) == 0 {
			return false
		}
		if confirm != nil {
			switch verdict, why := JudgeConfirmation(*confirm); verdict {
			case ConfirmYes:
				json.Unmarshal(t.Args, &a.Args)
				t.InputRequests = nil
				t.SubmittedAt = &now
				t.Phase = mapping.PhaseSubmitting
				t.Status = mapping.StatusWorking
				t.StatusMessage = fmt.Sprintf("confirmed; submitting the job to %s", t.Backend)
				a.Confirmed = true
			case ConfirmNo:
				end(t, Cancelled(why+"; no job was submitted"))
			default:
				// Not a confirmation: nothing is submitted, and the same
				// question is asked again, saying why (its wait keeps
				// counting).
				in := open[ConfirmKey]
				in.Note = "Not confirmed: " + why + "."
				open[ConfirmKey] = in
				t.InputRequests = EncodeInputs(open)
				t.StatusMessage = "waiting for the user to confirm: " + why
			}
			return true
		}
		sort.Strings(answered)
		t.AnsweredKeys = encodeKeys(answered)
		t.InputRequests = EncodeInputs(open)
		if len(open) == 0 {
			t.Status = mapping.StatusWorking
			t.JobMessage = "answers received; delivering them to the backend"
			compose(t, nil, now)
		}
		// Observe afresh on the next tasks/get.
		t.ObservedAt = nil
		return true
	})
	a.Task = u
	return a, err
}

// AnswersUndelivered records that answers could not be delivered to the
// backend: their keys are asked again.
func (l *Lifecycle) AnswersUndelivered(task *mapping.Task, keys map[string]adapters.Answer) {
	l.mutate(task, func(t *mapping.Task, now time.Time) bool {
		var keep []string
		for _, k := range DecodeKeys(t.AnsweredKeys) {
			if _, failed := keys[k]; !failed {
				keep = append(keep, k)
			}
		}
		t.AnsweredKeys = encodeKeys(keep)
		t.ObservedAt = nil
		t.JobMessage = "the answers could not be delivered to the backend; they will be asked again"
		compose(t, nil, now)
		return true
	})
}

// DeliverAnswers sends answers to the backend. The keys were already marked
// answered by a conditional write, so they are delivered once; if delivery
// fails they are asked again.
func (l *Lifecycle) DeliverAnswers(task *mapping.Task, answers map[string]adapters.Answer) {
	tl := l.toolOf(task)
	var ref adapters.JobRef
	if tl == nil || json.Unmarshal(task.JobRef, &ref) != nil {
		return
	}
	r, ok := tl.Adapter.(adapters.Responder)
	if !ok {
		l.log.Warn("backend asked for input but its adapter cannot deliver answers", "backend", task.Backend)
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.opts.CallTimeout)
	err := r.Respond(ctx, ref, answers)
	cancel()
	if err == nil {
		return
	}
	l.log.Debug("delivering answers", "task", ShortKey(task.Key), "job", ref.ID, "error", err)
	l.AnswersUndelivered(task, answers)
}
