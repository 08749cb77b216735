package lifecycle

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/mapping"
)

// textResults renders results as their text, for tests.
type textResults struct{}

func (textResults) Result(_ *mapping.Task, o adapters.Observation, ref adapters.JobRef) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"text": o.Message, "job": ref.ID})
	return b
}

func (textResults) Text(text string, isError bool) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"text": text, "isError": isError})
	return b
}

func (textResults) Failure(o adapters.Observation) (int, string) { return CodeInternal, o.Message }

// Status texts read as a person would write them.
func TestStatusTexts(t *testing.T) {
	l := &Lifecycle{opts: Options{Results: textResults{}}}
	l.log = discardLogger()
	tl := &catalog.Tool{MissingGrace: time.Minute}
	ref := adapters.JobRef{ID: "job-7"}
	for _, tt := range []struct {
		name string
		obs  adapters.Observation
		want string
	}{
		{"backend says only cancelled", adapters.Observation{State: adapters.StateCancelled, Message: "cancelled"}, "job job-7 was cancelled"},
		{"GitHub's status and conclusion", adapters.Observation{State: adapters.StateCancelled, Message: "completed: cancelled"}, "job job-7 was cancelled"},
		{"backend says more", adapters.Observation{State: adapters.StateCancelled, Message: "Terminated by operator alice"}, "job job-7 was cancelled: Terminated by operator alice"},
		{"cancelled array job shows no percentage", adapters.Observation{State: adapters.StateCancelled, Message: "0 of 10 children succeeded", Progress: &adapters.Progress{Done: 10, Total: 10}}, "job job-7 was cancelled: 0 of 10 children succeeded"},
		{"running array job shows its percentage", adapters.Observation{State: adapters.StateWorking, Message: "RUNNING", Progress: &adapters.Progress{Done: 3, Total: 10}}, "RUNNING (30%)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			task := &mapping.Task{Status: mapping.StatusWorking, Phase: mapping.PhaseSubmitted, Backend: "batch", JobID: "job-7"}
			l.apply(task, tl, ref, tt.obs, time.Now())
			if task.StatusMessage != tt.want {
				t.Errorf("status message %q, want %q", task.StatusMessage, tt.want)
			}
		})
	}
}
