// Package githubfake is an in-process fake of the GitHub REST API endpoints
// that drive GitHub Actions workflow runs, with scripted workflows. It speaks
// real HTTP and JSON as GitHub does, so the go-github client, the GitHub
// Actions adapter and `jobbridge demo` exercise their real code against it.
//
// A [Server] is an [http.Handler]; [Server.Start] also serves it on a
// loopback address and returns the base URL to give go-github. Run state is
// computed on each request from the server's clock ([Options.Now]), so a test
// with a fake clock is deterministic and the server runs no goroutines.
//
// # Endpoints
//
// Under the base URL (all of owner/repo exist; workflows are those of
// [Options.Workflows], by file name or numeric ID):
//
//	POST repos/{o}/{r}/actions/workflows/{wf}/dispatches    204; 200 {workflow_run_id, run_url, html_url} with return_run_details
//	GET  repos/{o}/{r}/actions/workflows/{wf}/runs          event, branch, status, created, per_page, page; newest first
//	GET  repos/{o}/{r}/actions/runs/{id}                    the run
//	GET  repos/{o}/{r}/actions/runs/{id}/jobs               its jobs (this attempt), paginated
//	GET  repos/{o}/{r}/actions/runs/{id}/artifacts          listed once the run has completed, paginated
//	GET  repos/{o}/{r}/actions/runs/{id}/pending_deployments
//	POST repos/{o}/{r}/actions/runs/{id}/pending_deployments {environment_ids, state, comment}, all required
//	POST repos/{o}/{r}/actions/runs/{id}/cancel             202 {}; 409 when completed
//	POST repos/{o}/{r}/actions/runs/{id}/force-cancel       202 {}; 409 when completed
//	GET  repos/{o}/{r}/actions/jobs/{id}/logs               302 to a pre-signed plain-text download under _blobs/
//	POST app/installations/{id}/access_tokens               201 {token, expires_at, ...} with [Options.AppPublicKey]
//
// Answers carry the members GitHub's OpenAPI description marks required
// (a run's head_commit, repository and head_repository with their owners,
// a job's node_id, check_run_url and runner_* members, started_at as a
// string even for a queued job, full user and team objects as reviewers,
// full deployment objects in review answers). Jobs and artifacts are
// paginated as on GitHub: per_page (default 30, at most 100) and page, a
// total_count of every page, and a Link header naming the prev, next, last
// and first pages. A new run appears in run listings only
// [Options.ListDelay] after its dispatch ([DefaultListDelay] by default), as
// on GitHub, while GET runs/{id} reads it at once.
//
// Every JSON GET answer carries a weak ETag; a request whose If-None-Match
// matches is answered 304 with no body. Every REST answer carries rate-limit
// headers (x-ratelimit-limit, -remaining, -used, -reset, -resource), as
// GitHub's do, refusals, errors and injected faults included, from a window
// per token of [Options.RateLimit] requests an hour; 304 answers and
// injected faults do not count.
// When the window is spent the answer is 403 with x-ratelimit-remaining 0.
// A 401 carries the headers of the unauthenticated window (60 an hour).
// With [Options.SecondaryLimits] the secondary limits apply too (100
// requests in flight; 900 points per endpoint and minute, a GET costing 1
// and a POST 5): a request beyond them is answered 403 with the
// secondary-limit message and retry-after, and takes no effect.
// An X-GitHub-Api-Version other than 2022-11-28 or 2026-03-10 is refused with
// 400. With [Options.Tokens] set, a request without one of them as bearer
// token is answered 401 "Bad credentials". Errors are {"message",
// "documentation_url"} as on GitHub.
//
// With [Options.AppPublicKey] the server is a GitHub App installation: the
// access_tokens endpoint takes a JWT signed with the matching private key
// (RS256, iss [Options.AppID], iat not in the future, exp at most ten minutes
// ahead; 401 otherwise, 404 for another installation) and issues a token that
// lives [Options.AppTokenLifetime] on the server's clock. API requests then
// need an issued, unexpired token (or one of [Options.Tokens]).
// [Server.TokenExchanges] counts the tokens issued.
//
// A dispatch needs ref (422 otherwise) and at most 25 inputs, whose values
// must be strings, booleans or numbers. As on GitHub it is answered 422
// "Workflow does not have 'workflow_dispatch' trigger" for a workflow with
// [Workflow.NoDispatchTrigger], "No ref found for: REF" for a ref outside
// [Options.Refs], and "Unexpected inputs provided: [...]" for inputs a
// workflow with [Workflow.Inputs] does not declare. With [Options.RejectRunDetails] the
// server refuses return_run_details as GitHub Enterprise Server 3.20 and
// older do. The input [ScriptInput] picks a script from [Options.Scripts].
//
// # Run timeline
//
// A run is "pending" for Script.Pending, "queued" for Script.Queued, then runs
// its jobs one after the other ("in_progress"); the run's updated_at moves at
// every transition, so its ETag changes then and only then. With
// [Options.JobsLeaveRunUnchanged] a job finishing while the run goes on
// leaves the run document unchanged (GitHub does not document either way). With an
// Approval, the run is "waiting" before the gated job until a review
// arrives: approved lets the job start, rejected ends the run "failure". When
// every job has run the run is "completed" with Script.Conclusion. A cancel
// applies Script.OnCancel (cancelled at once, ignored, or "failure"); a
// force-cancel always ends the run "cancelled". Cancelling (or
// force-cancelling) a completed run is 409 "Cannot cancel a workflow run
// that is completed.", as GitHub answers. A completed run's updated_at is
// when it completed (runs have no completion field of their own; jobs carry
// completed_at).
//
// # Test hooks
//
// [Server.Requests], [Server.NotModified], [Server.Counted],
// [Server.APIVersions], [Server.Dispatches], [Server.Cancels],
// [Server.ForceCancels] and [Server.Reviews] count what the server received;
// [Server.Purge] forgets a run, [Server.Rerun] starts a new attempt, and
// [Server.Inject] scripts failures: a status (optionally with a message of
// the test's choosing), a primary or secondary rate limit (403 or 429, with
// retry-after or x-ratelimit-reset; a secondary limit also carries the
// primary window's x-ratelimit headers, remaining not 0, as on GitHub),
// optionally after the request took effect, or a dropped connection.
//
// # Webhooks
//
// [Server.Webhook] points the server at a webhook receiver with a secret;
// each [Server.DeliverEvents] (or, on the real clock,
// [Server.DeliverEventsEvery]) then POSTs the workflow_run (requested,
// in_progress, completed) and workflow_job (queued, waiting, in_progress,
// completed) deliveries GitHub sends for every run and job state change
// since the last call, in GitHub's order, also for changes the clock passed
// over together. Each is signed as GitHub signs (X-Hub-Signature-256 and
// the legacy X-Hub-Signature) and carries GitHub's headers and payload
// (action, workflow_run and workflow or workflow_job, repository,
// organization, sender, and installation for an App; deployment for a job
// waiting on an environment). A re-run attempt sends no requested. As on
// GitHub a delivery is sent once, whatever the answer; [Server.Redeliver]
// sends one again with the same X-GitHub-Delivery, [Server.Ping] sends the
// ping of a new hook, and [Server.Deliveries] lists what was sent.
//
// # Exchange records
//
// When the environment variable JOBBRIDGE_EXCHANGES ([ExchangesEnv]) names
// a directory as the server is created, every exchange it serves is
// appended to JOBBRIDGE_EXCHANGES/github-PID.jsonl in the shared format the
// spec checks read; see [ExchangesEnv]. So is every webhook delivery it
// sends, with Operation [WebhookOperation] and the receiver's answer.
package githubfake
