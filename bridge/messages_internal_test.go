package bridge

import (
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/catalog"
	"github.com/jobbridge/jobbridge/mapping"
)

// Status texts read as a person would write them.
func TestStatusTexts(t *testing.T) {
	b := &Bridge{limits: catalog.Limits{MaxResultBytes: 1 << 10}}
	tl := &tool{Tool: &catalog.Tool{MissingGrace: time.Minute}}
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
			task := &mapping.Task{Status: mapping.StatusWorking, Phase: mapping.PhaseSubmitted, Backend: "batch"}
			b.apply(task, tl, ref, tt.obs, time.Now())
			if task.StatusMessage != tt.want {
				t.Errorf("status message %q, want %q", task.StatusMessage, tt.want)
			}
		})
	}
}
