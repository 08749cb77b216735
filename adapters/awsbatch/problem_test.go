package awsbatch

import (
	"net/http"
	"testing"
	"time"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/adapters/adaptertest"
	"github.com/jobbridge/jobbridge/internal/fakes/batchfake"
)

// TestCallProblems drives the Batch fake into failed calls and checks the
// problem the adapter reports through the real SDK: the API operation as
// its method, the HTTP status, Batch's error code and message as its words,
// and the class the caller is told: throttled, refused (a missing
// permission, an expired token), error.
func TestCallProblems(t *testing.T) {
	tests := []struct {
		name   string
		fault  batchfake.Fault
		op     string // "start", "poll" or "cancel"
		class  adapters.ProblemClass
		kind   error
		status int
		text   string
	}{
		{
			name:  "DescribeJobs answered ServerException",
			fault: batchfake.Fault{Operation: batchfake.OpDescribeJobs, Status: http.StatusInternalServerError},
			op:    "poll", class: adapters.ProblemError, status: 500,
			text: "DescribeJobs answered 500: ServerException: injected fault",
		},
		{
			name:  "DescribeJobs refused an expired token",
			fault: batchfake.Fault{Operation: batchfake.OpDescribeJobs, Status: http.StatusForbidden, Code: "ExpiredTokenException"},
			op:    "poll", class: adapters.ProblemRefused, status: 403,
			text: "DescribeJobs answered 403: ExpiredTokenException: injected fault",
		},
		{
			name:  "SubmitJob refused with a ClientException",
			fault: batchfake.Fault{Operation: batchfake.OpSubmitJob, Status: http.StatusBadRequest},
			op:    "start", class: adapters.ProblemError, status: 400,
			text: "SubmitJob answered 400: ClientException: injected fault",
		},
		{
			name:  "SubmitJob throttled",
			fault: batchfake.Fault{Operation: batchfake.OpSubmitJob, Status: http.StatusTooManyRequests},
			op:    "start", class: adapters.ProblemThrottled, kind: adapters.ErrThrottled, status: 429,
		},
		{
			name:  "TerminateJob denied",
			fault: batchfake.Fault{Operation: batchfake.OpTerminateJob, Status: http.StatusForbidden, Code: "AccessDeniedException"},
			op:    "cancel", class: adapters.ProblemRefused, kind: adapters.ErrCancelRefused, status: 403,
			text: "TerminateJob answered 403: AccessDeniedException: injected fault",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, &clock{base: t0}, BackendConfig{}, nil)
			var ref adapters.JobRef
			if tt.op != "start" {
				ref = f.start(job(quick(time.Hour, 0)))
			}
			f.fake.Inject(tt.fault)
			var err error
			switch tt.op {
			case "start":
				_, err = f.a.Start(t.Context(), job(quick(time.Hour, 0)))
			case "poll":
				obs, perr := f.a.Poll(t.Context(), []adapters.JobRef{ref})
				if perr != nil {
					t.Fatalf("Poll: %v; want the problem in the job's observation", perr)
				}
				err = obs[0].Err
			case "cancel":
				err = f.a.Cancel(t.Context(), ref)
			}
			if adaptertest.CheckProblem(t, tt.op, err, tt.class, tt.status, tt.kind) == nil {
				return
			}
			if tt.text != "" && err.Error() != tt.text {
				t.Errorf("problem reads\n  %s\nwant\n  %s", err, tt.text)
			}
		})
	}
}
