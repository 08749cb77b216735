// Package batchfake is an in-process fake of the AWS Batch job API. It speaks
// the service's restJson1 wire protocol, so the real AWS SDK client
// (github.com/aws/aws-sdk-go-v2/service/batch) talks to it unchanged: in the
// Batch adapter's tests, in `jobbridge demo` and in the conformance run.
//
// A [Server] is an [http.Handler]; [Server.Start] also serves it on a loopback
// address, which a client uses as its base endpoint:
//
//	srv := batchfake.New(nil)
//	url, _ := srv.Start("127.0.0.1:0")
//	client := batch.New(batch.Options{
//		Region:       "us-east-1",
//		BaseEndpoint: aws.String(url),
//		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
//	})
//
// Job state is computed lazily on each request from the server's clock
// ([Options.Now]), so a test with a fake clock is fully deterministic and the
// server runs no goroutines of its own (but for the event loop of Start, see
// Events).
//
// # Wire protocol
//
// Every operation is POST /v1/<operation in lower case> with a JSON body in
// camelCase, answered 200 with a JSON body. A request must carry a SigV4
// Authorization header ("AWS4-HMAC-SHA256 Credential=..."); its signature is
// not checked. Without one the answer is 403 UnrecognizedClientException.
// Errors carry the code in the X-Amzn-ErrorType header and in the body:
//
//	X-Amzn-ErrorType: ClientException
//	{"__type": "ClientException", "message": "..."}
//
// with these codes:
//
//	400 ClientException                a bad request (a missing field, more than 100 IDs, an unknown job or queue)
//	403 UnrecognizedClientException    no SigV4 Authorization header
//	404 UnknownOperationException      another path or method
//	429 TooManyRequestsException       only when injected (see Faults)
//	500 ServerException                only when injected (the model's only server error; always a 500)
//	503 ServiceUnavailable             only when injected (an AWS common error: no operation declares a 503)
//
// The codes an operation does not declare are AWS's common errors, which any
// AWS API may answer (UnrecognizedClientException, ServiceUnavailable,
// InternalFailure, ...), and Batch's documented throttling error,
// TooManyRequestsException; `make spec-check` holds the fake to that.
//
// Every answer, success or error, carries an x-amzn-RequestId header (a
// random UUID), as Batch's do.
//
// # Operations
//
//	POST /v1/submitjob         SubmitJob
//	POST /v1/describejobs      DescribeJobs
//	POST /v1/listjobs          ListJobs
//	POST /v1/terminatejob      TerminateJob
//	POST /v1/canceljob         CancelJob
//	POST /v1/getjobqueuesnapshot GetJobQueueSnapshot
//
// SubmitJob {"jobName", "jobQueue", "jobDefinition", "parameters",
// "containerOverrides": {"command", "environment", "resourceRequirements",
// "vcpus", "memory"}, "arrayProperties": {"size"}, "dependsOn": [{"jobId",
// "type"}], "retryStrategy": {"attempts"}, "timeout":
// {"attemptDurationSeconds"}, "tags", "propagateTags", "shareIdentifier",
// "schedulingPriorityOverride"} answers {"jobId", "jobName", "jobArn"}. It
// checks what Batch checks: jobName 1-128 characters of [A-Za-z0-9_-]
// starting with a letter or digit; jobQueue and jobDefinition present (and,
// with [Options.Queues], a known queue); array size 2-10,000; at most 20
// dependencies on jobs that exist; 1-10 retry attempts; a timeout of at least
// 60 seconds; at most 50 tags; a valid jobbridge_script (below). Job IDs are
// UUID-shaped and sequential per server (…-000000000001, …-000000000002, …);
// array children are <parent>:<index>.
//
// DescribeJobs {"jobs": [id, ...]} answers {"jobs": [JobDetail, ...]} in the
// order asked, for up to 100 IDs (more is a 400 ClientException saying "Maximum
// number of jobs supported is 100"). Unknown, purged, expired and still hidden
// IDs are silently left out, as Batch does. A JobDetail has jobId, jobName,
// jobArn, jobQueue (ARN), jobDefinition (ARN), status, statusReason,
// createdAt / startedAt / stoppedAt (Unix milliseconds), isCancelled,
// isTerminated, parameters, tags, dependsOn, retryStrategy, timeout,
// container {command, environment, resourceRequirements, exitCode, reason,
// logStreamName}, attempts [{container {exitCode, reason, logStreamName},
// startedAt, stoppedAt, statusReason}] and, for array jobs, arrayProperties
// {size, statusSummary, statusSummaryLastUpdatedAt} on the parent and
// {index} on a child.
//
// ListJobs {"jobQueue" | "arrayJobId" | "multiNodeJobId", "jobStatus",
// "filters": [{"name", "values"}], "maxResults", "nextToken"} answers
// {"jobSummaryList": [...], "nextToken"}, newest first. As in Batch: at most
// one filter, JOB_NAME (case-insensitive; a trailing * matches a prefix),
// JOB_DEFINITION (case-sensitive; a name matches every revision of it, a
// trailing * a name prefix, an ARN that revision only, and an ARN with * is
// a ClientException), SHARE_IDENTIFIER, BEFORE_CREATED_AT or
// AFTER_CREATED_AT (Unix milliseconds); with a filter every status is
// listed (SHARE_IDENTIFIER alone combines with jobStatus), without one only
// jobStatus (default RUNNING). maxResults is 1-1000 (default 100);
// nextToken is opaque. ListJobs lags submissions as Batch's does: a job is
// listed only [Options.ListingLag] (default 2s) after its submission, while
// DescribeJobs answers for it at once.
//
// TerminateJob and CancelJob {"jobId", "reason"} answer {} (an unknown job is
// a 400 ClientException; a finished one is left alone). TerminateJob stops a
// job in any state: a SUBMITTED or RUNNABLE job ends FAILED with
// isCancelled at once; a PENDING one only once its dependencies have
// finished ("a PENDING job is canceled after all dependency jobs are
// completed"), staying PENDING until then; a STARTING or RUNNING one gets
// SIGTERM and stays RUNNING until its container exits (the script's
// terminate_delay, exit code 143) or the grace ends ([Options.TerminateGrace],
// default 30s, exit code 137), then ends FAILED with isTerminated and is
// not retried. CancelJob only
// affects SUBMITTED, PENDING and RUNNABLE jobs and does nothing to STARTING or
// RUNNING ones, yet still answers {}. The reason becomes the statusReason.
// Stopping an array parent stops its children.
//
// GetJobQueueSnapshot {"jobQueue"} answers {"frontOfQueue": {"jobs":
// [{"jobArn", "earliestTimeAtPosition"}], "lastUpdatedAt"}}: the first 100
// RUNNABLE jobs of the queue, longest waiting first.
//
// # Scripted lifecycles
//
// A job follows the script in its parameter "jobbridge_script", or else its
// tag "jobbridge_script": comma-separated key=value directives, durations in
// Go syntax. Unknown keys are a 400 ClientException at submission.
//
//	submitted=500ms    time in SUBMITTED
//	pending=0s         time in PENDING (after which dependencies must also have finished)
//	runnable=1s        time in RUNNABLE, waiting for "capacity"
//	runnable_reason=X  statusReason while RUNNABLE, e.g. CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY
//	starting=500ms     time in STARTING
//	running=3s         time in RUNNING, per attempt
//	exit=0             exit code of every attempt; non-zero fails the attempt
//	hidden=0s          DescribeJobs and ListJobs leave the job out for this long after submission
//	terminate_delay=   how long the container takes to exit on SIGTERM; unset: it ignores SIGTERM and is killed after the grace
//	stagger=0s         array jobs: child i waits i*stagger longer in RUNNABLE
//	fail_children=0    array jobs: children 0..n-1 exit with exit (or 1 when exit is 0); the others exit 0
//
// The defaults are shown. A job whose attempt exits non-zero is retried up to
// retryStrategy.attempts attempts in all: it goes back to RUNNABLE, then
// STARTING and RUNNING again, and DescribeJobs lists each finished attempt
// in attempts; the last failed
// attempt ends it FAILED with statusReason "Essential container in task
// exited". An attempt running longer than timeout.attemptDurationSeconds is
// stopped at the timeout and the job ends FAILED with "Job attempt duration
// exceeded timeout" (no retry). A dependency that fails ends its dependants
// FAILED with "Dependent Job failed". An array parent is PENDING while its
// children run, then SUCCEEDED when every child succeeded, else FAILED with
// "Array Child Job failed". For example
//
//	"jobbridge_script": "submitted=0s,runnable=0s,starting=0s,running=2s,exit=3"
//
// runs two seconds and fails with exit code 3.
//
// # Test hooks
//
// [Server.Calls] counts requests per operation (including faulted ones),
// [Server.JobsNamed] counts the jobs created with a name, [Server.Purge]
// forgets a job as Batch does some time after it finished
// ([Options.Retention] does it automatically), and [Server.Inject] scripts
// failures: throttling storms (N answers 429 TooManyRequestsException,
// optionally with a Retry-After header; [Server.ClearFaults] ends a storm),
// 5xx answers, dropped connections, and, with [Fault.AfterHandling], crash-time
// duplicates: SubmitJob creates the job and then answers 500, so the client
// cannot tell whether the job exists. Injected answers are recorded with
// "injected": true.
//
// # Events
//
// With [Options.Events] the server also plays AWS Batch's EventBridge
// integration: each job state change is sent, as Batch sends it through a
// rule ({"source": ["aws.batch"], "detail-type": ["Batch Job State
// Change"]}) to an API destination whose connection has API key
// authorization, as a POST to [EventsOptions.URL] with the headers an API
// destination sends:
//
//	Content-Type: application/json; charset=utf-8
//	User-Agent: Amazon/EventBridge/ApiDestinations
//	Range: bytes=0-1048575
//	Accept-Encoding: gzip,deflate
//	Connection: close
//	X-Jobbridge-Key: <EventsOptions.Key>     (the header named by KeyHeader)
//
// and the event envelope as body:
//
//	{"version": "0", "id": "<random UUID>", "detail-type": "Batch Job State Change",
//	 "source": "aws.batch", "account": "123456789012", "time": "2026-01-02T03:04:05Z",
//	 "region": "us-east-1", "resources": ["<job ARN>"], "detail": {<JobDetail>}}
//
// time is the moment of the change in whole seconds, and detail is the
// job's JobDetail at that moment, exactly as DescribeJobs would have
// answered it then (timestamps in it are Unix milliseconds). An event is
// sent each time a job's status, or its number of finished attempts,
// changes; none for the submission itself, and none for a scripted phase
// of no length. Array children send their own events (as PARENT:INDEX),
// beside their parent's.
//
// State is still computed lazily: [Server.SendEvents] sends the changes up
// to the server's clock, oldest first, so that a test with a manual clock
// decides when events go out; [Server.Start] runs a loop that calls it
// every [EventsOptions.Interval] (default 1s) until [Server.Close]. As
// EventBridge does, a delivery answered 429 or 5xx, or not answered within
// the client's timeout (default 5s), is sent again later with the same id;
// any other answer ends it. [Server.Redeliver] sends a delivered event
// again, same id and body, and [Server.Events] lists what was sent.
//
// # Exchange recording
//
// With [Options.ExchangeDir] (default: the environment variable
// JOBBRIDGE_EXCHANGES) the server appends every exchange it answers to
// <dir>/batch-<pid>.jsonl, one JSON object a line, written in one append
// under a process-wide lock: backend ("batch"), method, path, query,
// request_headers (without Authorization, X-Amz-Security-Token and
// Cookie), request_body, status (0 for a dropped connection),
// response_headers, response_body, operation (SubmitJob, DescribeJobs, ...),
// and injected and truncated (bodies over 1 MiB) when true. Event
// deliveries are recorded too, from the sending side, with operation
// EventDelivery ([OpEventDelivery]), the URL's path and query, the request
// headers with Host and Content-Length and the API key's value replaced by
// "[redacted]", and the receiver's answer (status 0 when there was none).
package batchfake
