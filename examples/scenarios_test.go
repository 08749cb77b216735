package examples_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/jobbridge/jobbridge/adapters"
	"github.com/jobbridge/jobbridge/internal/fakes/scripted"
)

// examples are the scenarios of each example: what a user relies on.
var examples = []example{
	{
		dir:  "jenkins",
		host: "https://jenkins.example.com",
		env:  map[string]string{"JENKINS_BASIC_AUTH": "amVua2luczpzM2NyM3Q="},
		scenarios: []scenario{
			{"a build waits in the queue, runs and succeeds", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"job": "app", "branch": "main"})
				q := e.only(t, "start").Query
				wantEqual(t, "the build parameters", map[string]string{"BRANCH": q.Get("BRANCH"), "JOBBRIDGE_CORRELATION_ID": q.Get("JOBBRIDGE_CORRELATION_ID")},
					map[string]string{"BRANCH": "main", "JOBBRIDGE_CORRELATION_ID": "corr-1"})
				obs := e.run(t, &ref)
				if obs[0].State != adapters.StateWorking || !strings.Contains(obs[0].Message, "queued at the backend") {
					t.Errorf("first observation %v %q, want working and \"queued at the backend …\"", obs[0].State, obs[0].Message)
				}
				o := last(t, obs, adapters.StateSucceeded)
				wantEqual(t, "message", o.Message, "build #1 finished: SUCCESS")
				wantEqual(t, "result", o.Result.Text, "app #1: SUCCESS after 754s")
				// The build is followed by its number, not the queue item's.
				if rs := e.requests("build"); len(rs) == 0 || rs[0].Path != "/job/app/1/api/json" {
					t.Errorf("build requests %+v, want GET /job/app/1/api/json", rs)
				}
				wantEqual(t, "links", o.Links, []adapters.Link{{Title: "Build", URL: e.base + "/job/app/1/"}, {Title: "Console", URL: e.base + "/job/app/1/console"}})
			}},
			{"a failed build completes as a tool error", func(t *testing.T, e *env) {
				o := last(t, e.runNew(t, map[string]any{"job": "app", "branch": "broken"}), adapters.StateToolError)
				wantEqual(t, "result", o.Result.Text, "app #1: FAILURE after 61s")
			}},
			{"cancel while queued removes the queue item", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"job": "app", "branch": "main"})
				if err := e.adapter.Cancel(ctx(t), ref); err != nil {
					t.Fatalf("Cancel: %v", err)
				}
				wantEqual(t, "cancelItem query", e.only(t, "cancel_item").Query.Get("id"), ref.ID)
				if n := len(e.requests("stop")); n != 0 {
					t.Errorf("%d build stops, want none: no build started", n)
				}
				// The cancel was honoured: the queued request is cancelled and
				// never started (the task ends cancelled, not failed).
				neverStarted(t, e.poll(t, &ref), "GET /queue/item/"+ref.ID+"/api/json answered 200: cancelled in the queue")
				if n := len(e.requests("build")); n != 0 {
					t.Errorf("%d build requests, want none: no build started", n)
				}
			}},
			{"cancel aborts the running build", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"job": "app", "branch": "main"})
				e.pollPast(t, &ref, 2) // queued, then the build is running
				if err := e.adapter.Cancel(ctx(t), ref); err != nil {
					t.Fatalf("Cancel: %v", err)
				}
				wantEqual(t, "stop request", e.only(t, "stop").Path, "/job/app/1/stop")
				o := last(t, e.run(t, &ref), adapters.StateCancelled)
				wantEqual(t, "message", o.Message, "build #1 finished: ABORTED")
			}},
			{"a queue item cancelled in Jenkins never started, in Jenkins' terms", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"job": "app", "branch": "doomed"})
				if o := e.poll(t, &ref); o.Err != nil || o.State != adapters.StateWorking {
					t.Fatalf("first observation %v %q, want working (queued)", o.State, words(o))
				}
				neverStarted(t, e.poll(t, &ref), "GET /queue/item/"+ref.ID+"/api/json answered 200: cancelled in the queue")
				if rs := e.requests("build"); len(rs) != 0 {
					t.Errorf("a build was asked about: %+v", rs)
				}
			}},
			{"a queue item that vanishes before naming a build is not found and never started", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"job": "app", "branch": "main"})
				if o := e.poll(t, &ref); o.Err != nil || o.State != adapters.StateWorking {
					t.Fatalf("first observation %v %q, want working (queued)", o.State, words(o))
				}
				// The controller lost its queue (a restart, a cleared queue):
				// every later answer about the item is a 404.
				for at := 2; at < 10; at++ {
					e.fake.Inject(scripted.Fault{Route: "queue", At: at, Response: scripted.Response{Status: 404}})
				}
				o := e.poll(t, &ref)
				notFound(t, o, "the queue item is gone and no job was ever named for it")
				neverStarted(t, o, "GET /queue/item/"+ref.ID+"/api/json answered 404: the queue item is gone and no job was ever named for it")
			}},
		},
	},
	{
		dir:   "kubernetes",
		host:  "https://kubernetes.default.svc",
		files: map[string]string{"/var/run/secrets/kubernetes.io/serviceaccount/token": "sa-token-1\n"},
		scenarios: []scenario{
			{"a Job runs to Complete, its argument one shell word", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"image": "registry.example.com/migrate:1.4", "target": "orders; rm -rf / #"})
				b := body(t, e.only(t, "create"))
				wantEqual(t, "container command", at(b, "spec", "template", "spec", "containers", 0, "command"),
					any([]any{"/bin/sh", "-c", "exec /app/migrate --target 'orders; rm -rf / #'"}))
				wantEqual(t, "correlation label", at(b, "metadata", "labels", "jobbridge.io/correlation"), any("corr-1"))
				wantEqual(t, "job name", ref.ID, "jobbridge-migrate-x1k")
				obs := e.run(t, &ref)
				wantEqual(t, "first message", obs[0].Message, "0 active, 0 succeeded, 0 failed")
				wantEqual(t, "second message", obs[1].Message, "1 active, 0 succeeded, 0 failed")
				o := last(t, obs, adapters.StateSucceeded)
				wantEqual(t, "result", o.Result.Text, "Job jobbridge-migrate-x1k: 1 succeeded, 0 failed")
				wantEqual(t, "progress", o.Progress, &adapters.Progress{Done: 1, Total: 1})
				finishedAt(t, o, "2026-12-01T10:04:10Z")
			}},
			{"a rotated service-account token is read again", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"image": "registry.example.com/migrate:1.4", "target": "orders"})
				if o := e.poll(t, &ref); o.Err != nil {
					t.Fatalf("Poll with the first token: %v", o.Err)
				}
				tok := e.files["/var/run/secrets/kubernetes.io/serviceaccount/token"]
				if err := os.WriteFile(tok, []byte("sa-token-2\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				e.fake.SetAccepted("Bearer sa-token-2")
				o := e.poll(t, &ref)
				if o.Err != nil || o.State != adapters.StateWorking {
					t.Fatalf("Poll after the rotation: %v %q, want working", o.State, words(o))
				}
			}},
			{"a failed Job is a tool error with the condition's reason", func(t *testing.T, e *env) {
				o := last(t, e.runNew(t, map[string]any{"image": "registry.example.com/migrate:broken", "target": "orders"}), adapters.StateToolError)
				wantEqual(t, "message", o.Message, "BackoffLimitExceeded: Job has reached the specified backoff limit")
				wantEqual(t, "result", o.Result.Text, "Job jobbridge-migrate-x1f: 0 succeeded, 1 failed")
			}},
			{"cancel deletes the Job with its pods in the background; then the Job is gone", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"image": "registry.example.com/migrate:1.4", "target": "orders"})
				e.pollPast(t, &ref, 1)
				if err := e.adapter.Cancel(ctx(t), ref); err != nil {
					t.Fatalf("Cancel: %v", err)
				}
				d := e.only(t, "delete")
				wantEqual(t, "delete", d.Path+"?propagationPolicy="+d.Query.Get("propagationPolicy"),
					"/apis/batch/v1/namespaces/batch-jobs/jobs/jobbridge-migrate-x1k?propagationPolicy=Background")
				notFound(t, e.poll(t, &ref), `jobs.batch "jobbridge-migrate-x1k" not found`)
			}},
			{"find locates the Job by its correlation label", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"image": "registry.example.com/migrate:1.4", "target": "orders"})
				if _, err := e.adapter.Start(ctx(t), e.request("corr-2", map[string]any{"image": "registry.example.com/migrate:1.4", "target": "users"})); err != nil {
					t.Fatal(err)
				}
				got, found := e.find(t, "corr-1", map[string]any{"image": "registry.example.com/migrate:1.4", "target": "orders"})
				if !found || got.ID != ref.ID {
					t.Fatalf("Find(corr-1) = %q, %v; want %q", got.ID, found, ref.ID)
				}
				wantEqual(t, "label selector", e.requests("list")[0].Query.Get("labelSelector"), "jobbridge.io/correlation=corr-1")
				if o := e.poll(t, &got); o.Err != nil {
					t.Errorf("Poll of the found job: %v", o.Err)
				}
				if got, found := e.find(t, "corr-9", map[string]any{"image": "registry.example.com/migrate:1.4", "target": "orders"}); found {
					t.Errorf("Find(corr-9) found %q, want none", got.ID)
				}
			}},
		},
	},
	{
		dir:  "slurm",
		host: "https://slurm.example.com",
		env:  map[string]string{"SLURM_JWT": "eyJhbGciOi.slurm.jwt"},
		scenarios: []scenario{
			{"a batch script runs with its argument quoted, and completes", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"case": "it's $(id)", "partition": "cpu"})
				r := e.only(t, "submit")
				b := body(t, r)
				wantEqual(t, "script", at(b, "job", "script"), any("#!/bin/bash\nset -euo pipefail\nexec /opt/sim/bin/simulate --case 'it'\\''s $(id)'\n"))
				wantEqual(t, "partition", at(b, "job", "partition"), any("cpu"))
				wantEqual(t, "user name header", r.Header.Get("X-Slurm-User-Name"), "jobbridge")
				wantEqual(t, "job ID", ref.ID, "1")
				obs := e.run(t, &ref)
				wantEqual(t, "first message", obs[0].Message, "job 1 PENDING (Priority)")
				o := last(t, obs, adapters.StateSucceeded)
				wantEqual(t, "result", o.Result.Text, "job 1 COMPLETED, exit status 0")
			}},
			{"a non-zero exit is a tool error with the exit status decoded", func(t *testing.T, e *env) {
				o := last(t, e.runNew(t, map[string]any{"case": "diverging-mesh", "partition": "cpu"}), adapters.StateToolError)
				wantEqual(t, "result", o.Result.Text, "job 1 FAILED, exit status 3")
				wantEqual(t, "message", o.Message, "job 1 FAILED (NonZeroExitCode)")
			}},
			{"a refused submission carries Slurm's reason", func(t *testing.T, e *env) {
				_, err := e.adapter.Start(ctx(t), e.request("corr-1", map[string]any{"case": "a", "partition": "debug"}))
				refusal(t, err, "Invalid partition name specified (Batch job submission failed)")
			}},
			{"an unknown job is not found", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"case": "a", "partition": "cpu"})
				notFound(t, e.pollOther(t, ref, "999"), "Invalid job id specified")
			}},
			{"cancel signals the job, which ends cancelled", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"case": "a", "partition": "cpu"})
				e.pollPast(t, &ref, 2)
				if err := e.adapter.Cancel(ctx(t), ref); err != nil {
					t.Fatalf("Cancel: %v", err)
				}
				wantEqual(t, "cancel", e.only(t, "cancel").Path, "/slurm/v0.0.40/job/1")
				last(t, e.run(t, &ref), adapters.StateCancelled)
			}},
		},
	},
	{
		dir:  "databricks",
		host: "https://dbc-a1b2c3d4-e5f6.cloud.databricks.com",
		env:  map[string]string{"DATABRICKS_CLIENT_ID": "sp-client-id", "DATABRICKS_CLIENT_SECRET": "sp-secret"},
		scenarios: []scenario{
			{"an OAuth machine-to-machine token, then the run succeeds", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"job_id": float64(42), "run_date": "2026-12-01"})
				all := e.fake.Requests()
				if len(all) < 2 || all[0].Route != "token" {
					t.Fatalf("requests %+v, want the token request first", all)
				}
				tok := all[0]
				wantContains(t, "token request", tok.Body, "grant_type=client_credentials")
				wantContains(t, "token request", tok.Body, "scope=all-apis")
				b := body(t, e.only(t, "run_now"))
				wantEqual(t, "run-now body", b, map[string]any{"job_id": float64(42), "idempotency_token": "corr-1",
					"job_parameters": map[string]any{"run_date": "2026-12-01", "jobbridge_correlation_id": "corr-1"}})
				obs := e.run(t, &ref)
				wantEqual(t, "first message", obs[0].Message, "QUEUED: Waiting for a cluster")
				o := last(t, obs, adapters.StateSucceeded)
				wantEqual(t, "result", o.Result.Text, "nightly-etl run 1: SUCCESS")
				wantEqual(t, "status query", e.requests("runs_get")[0].Query.Get("run_id"), "1")
				if n := len(e.requests("token")); n != 1 {
					t.Errorf("%d token requests, want 1 (the token is cached)", n)
				}
			}},
			{"an unknown run is not found", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"job_id": float64(42), "run_date": "2026-12-01"})
				notFound(t, e.pollOther(t, ref, "999"), "Run 999 does not exist.")
			}},
			{"run-now of an unknown job is refused with Databricks' words", func(t *testing.T, e *env) {
				_, err := e.adapter.Start(ctx(t), e.request("corr-1", map[string]any{"job_id": float64(999), "run_date": "2026-12-01"}))
				refusal(t, err, "INVALID_PARAMETER_VALUE: Job 999 does not exist.")
			}},
			{"cancel cancels the run, which ends cancelled", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"job_id": float64(42), "run_date": "2026-12-01"})
				e.pollPast(t, &ref, 1)
				if err := e.adapter.Cancel(ctx(t), ref); err != nil {
					t.Fatalf("Cancel: %v", err)
				}
				wantEqual(t, "cancel body", body(t, e.only(t, "runs_cancel")), map[string]any{"run_id": float64(1)})
				o := last(t, e.run(t, &ref), adapters.StateCancelled)
				wantEqual(t, "message", o.Message, "TERMINATED: Run cancelled.")
			}},
			{"an expired token is renewed after a 401", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"job_id": float64(42), "run_date": "2026-12-01"})
				e.fake.Inject(scripted.Fault{Route: "runs_get", At: 1, Response: scripted.Response{Status: 401, Body: map[string]any{"error_code": "UNAUTHENTICATED", "message": "Token expired"}}})
				if o := e.poll(t, &ref); o.Err != nil || o.State != adapters.StateWorking {
					t.Fatalf("Poll after the 401: %v %q, want working", o.State, words(o))
				}
				if n := len(e.requests("token")); n != 2 {
					t.Errorf("%d token requests, want 2 (one renewal after the 401)", n)
				}
			}},
		},
	},
	{
		dir:  "argo",
		host: "https://argo.example.com",
		env:  map[string]string{"ARGO_TOKEN": "argo-sa-token"},
		scenarios: []scenario{
			{"a workflow reports its node progress and succeeds", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"template": "build-and-test", "message": "hello"})
				b := body(t, e.only(t, "create"))
				wantEqual(t, "parameters", at(b, "workflow", "spec", "arguments", "parameters"), any([]any{map[string]any{"name": "message", "value": "hello"}}))
				wantEqual(t, "workflow name", ref.ID, "build-and-test-w1")
				obs := e.run(t, &ref)
				var progress []adapters.Progress
				for _, o := range obs {
					if o.Progress != nil && o.Progress.Total > 0 {
						progress = append(progress, *o.Progress)
					}
				}
				wantEqual(t, "progress", progress, []adapters.Progress{{Done: 1, Total: 3}, {Done: 2, Total: 3}, {Done: 3, Total: 3}})
				o := last(t, obs, adapters.StateSucceeded)
				wantEqual(t, "result", o.Result.Text, "workflow build-and-test-w1 Succeeded (3/3 nodes)")
				finishedAt(t, o, "2026-12-01T10:03:00Z")
			}},
			{"a failed workflow is a tool error with its message", func(t *testing.T, e *env) {
				o := last(t, e.runNew(t, map[string]any{"template": "flaky"}), adapters.StateToolError)
				wantEqual(t, "message", o.Message, "child 'build' failed")
			}},
			{"cancel stops the workflow, which then reads cancelled", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"template": "build-and-test"})
				e.pollPast(t, &ref, 2)
				if err := e.adapter.Cancel(ctx(t), ref); err != nil {
					t.Fatalf("Cancel: %v", err)
				}
				r := e.only(t, "stop")
				wantEqual(t, "stop", r.Method+" "+r.Path, "PUT /api/v1/workflows/ci/build-and-test-w1/stop")
				o := last(t, e.run(t, &ref), adapters.StateCancelled)
				wantEqual(t, "message", o.Message, "Stopped with strategy 'Stop'")
			}},
			{"find locates the workflow by its correlation label", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"template": "build-and-test"})
				got, found := e.find(t, "corr-1", map[string]any{"template": "build-and-test"})
				if !found || got.ID != ref.ID {
					t.Fatalf("Find(corr-1) = %q, %v; want %q", got.ID, found, ref.ID)
				}
				wantEqual(t, "label selector", e.requests("list")[0].Query.Get("listOptions.labelSelector"), "jobbridge.io/correlation=corr-1")
				if got, found := e.find(t, "corr-9", map[string]any{"template": "build-and-test"}); found {
					t.Errorf("Find(corr-9) found %q, want none", got.ID)
				}
			}},
		},
	},
	{
		dir:  "airflow",
		host: "https://airflow.example.com",
		env:  map[string]string{"AIRFLOW_BASIC_AUTH": "am9iYnJpZGdlOmFpcmZsMHc="},
		scenarios: []scenario{
			{"the run is named by the correlation ID and succeeds with its conf", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"dag_id": "etl", "conf": map[string]any{"date": "2026-12-01"}})
				wantEqual(t, "trigger body", body(t, e.only(t, "trigger")), map[string]any{"dag_run_id": "corr-1", "conf": map[string]any{"date": "2026-12-01"}, "note": "triggered through jobbridge"})
				wantEqual(t, "run ID", ref.ID, "corr-1")
				o := last(t, e.run(t, &ref), adapters.StateSucceeded)
				wantEqual(t, "result", o.Result.Text, "DAG etl run corr-1: success")
				wantEqual(t, "structured result", o.Result.Structured, map[string]any{"date": "2026-12-01"})
				finishedAt(t, o, "2026-12-01T10:07:42Z")
			}},
			{"a trigger answered 409 is reconciled by reading the run", func(t *testing.T, e *env) {
				first := e.start(t, map[string]any{"dag_id": "etl"})
				_, err := e.adapter.Start(ctx(t), e.request("corr-1", map[string]any{"dag_id": "etl"}))
				if !errors.Is(err, adapters.ErrOutcomeUnknown) {
					t.Fatalf("second Start: %v, want an unknown outcome", err)
				}
				got, found := e.find(t, "corr-1", map[string]any{"dag_id": "etl"})
				if !found || got.ID != first.ID {
					t.Fatalf("Find(corr-1) = %q, %v; want %q", got.ID, found, first.ID)
				}
				wantEqual(t, "find path", e.requests("get")[0].Path, "/api/v1/dags/etl/dagRuns/corr-1")
			}},
			{"a trigger of an unknown DAG is refused with Airflow's words", func(t *testing.T, e *env) {
				_, err := e.adapter.Start(ctx(t), e.request("corr-1", map[string]any{"dag_id": "missing_dag"}))
				refusal(t, err, "DAG with dag_id: 'missing_dag' not found")
			}},
			{"cancel marks the run failed; it finished after the cancel", func(t *testing.T, e *env) {
				ref := e.start(t, map[string]any{"dag_id": "etl"})
				e.pollPast(t, &ref, 2)
				if err := e.adapter.Cancel(ctx(t), ref); err != nil {
					t.Fatalf("Cancel: %v", err)
				}
				r := e.only(t, "patch")
				wantEqual(t, "cancel", r.Method+" "+r.Path+" "+r.Body, `PATCH /api/v1/dags/etl/dagRuns/corr-1 {"state":"failed"}`)
				o := last(t, e.run(t, &ref), adapters.StateToolError)
				finishedAt(t, o, "2026-12-01T10:01:00Z")
			}},
			{"a run that was never created is not found", func(t *testing.T, e *env) {
				if got, found := e.find(t, "corr-9", map[string]any{"dag_id": "etl"}); found {
					t.Errorf("Find(corr-9) found %q, want none", got.ID)
				}
				ref := e.start(t, map[string]any{"dag_id": "etl"})
				notFound(t, e.pollOther(t, ref, "corr-9"), "DagRun ID: 'corr-9' not found")
			}},
		},
	},
}
