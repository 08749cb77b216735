// Package jobapi is an in-process fake of a generic REST job API with scripted
// jobs. It speaks real HTTP and JSON, so the REST adapter, `jobbridge demo`
// and the conformance run exercise their real clients against it.
//
// A [Server] is an [http.Handler]; [Server.Start] also serves it on a loopback
// address. Job state is computed lazily on each request from the server's
// clock ([Options.Now]), so a test with a fake clock is fully deterministic and
// the server runs no goroutines of its own (except the callback sender, below,
// when asked for one).
//
// # Submitting a job
//
// POST /jobs takes a JSON job script (Content-Type application/json; a
// request without a Content-Type is accepted, any other type is answered 415).
// Every field is optional and unknown fields are ignored:
//
//	{"correlation_id":   "c-123",   // also read from header X-Correlation-ID; the body wins
//	 "queue_seconds":    0,         // time in "queued" before "running"
//	 "duration_seconds": 2.5,       // time spent "running" (after the answers, if any)
//	 "outcome":          "success", // success | tool_error | protocol_error
//	 "output":           "text",    // result text; default "job <id> finished"
//	 "data":             {},        // structured result object
//	 "error_message":    "text",    // status message of a failed job, error.message of an errored one
//	 "questions":        [{"key": "approve", "message": "Deploy?", "schema": {"type": "object"}}],
//	 "ask_after_seconds": 0,        // running time before the questions are asked
//	 "on_cancel":        "cancel"}  // cancel | ignore | finish | refuse
//
// Answers: 201 Created with Location: /jobs/<id> and the job document. IDs
// are sequential per server: job-000001, job-000002, ... A body that is not
// JSON, or not a JSON object, is answered 400; a bad value (a negative or
// huge number, a wrong type, an unknown outcome or on_cancel, an empty or
// repeated question key, a schema that is not an object) 422; a body over
// 1 MiB 413. Error bodies are {"error": "..."}.
//
// With header Idempotency-Key, a key already used for a job that still exists
// answers 200 with that job and creates nothing (the repeated body is not
// compared). Purging the job frees its key.
//
// # Job timeline
//
// A job is "queued" for queue_seconds, then "running". Without questions it
// runs duration_seconds and ends. With questions it runs ask_after_seconds,
// then sits in "waiting_input" until every key has been answered "accept",
// then runs duration_seconds more and ends. A "decline" or "cancel" answer
// ends the job "cancelled" with message "declined by user". The end state
// follows the outcome:
//
//	success        "succeeded", result {"text": output, "data": data}
//	tool_error     "failed",    result {"text": output, "data": data}, message error_message
//	protocol_error "error",     error {"code": -32603, "message": error_message}
//
// With duration_seconds 0 and no questions a job has finished by the time
// POST /jobs answers.
//
// # Job document
//
//	{"id": "job-000001",
//	 "status": "queued|running|waiting_input|succeeded|failed|error|cancelled",
//	 "message": "human text",
//	 "correlation_id": "c-123",                   // absent when none
//	 "progress": {"done": 1.5, "total": 2.5},     // running seconds; while running or waiting_input
//	 "questions": [{"key", "message", "schema"}], // outstanding ones only, while waiting_input
//	 "result": {"text": "...", "data": {...}},    // succeeded or failed
//	 "error": {"code": -32603, "message": "..."}, // error
//	 "created_at": "RFC 3339", "finished_at": "RFC 3339"} // finished_at once finished
//
// progress.total is ask_after_seconds + duration_seconds for a job with
// questions, duration_seconds otherwise.
//
// # Endpoints
//
//	GET  /jobs/<id>               200 job document; 404 {"error":"job not found"} when unknown or purged
//	GET  /jobs?correlation_id=<c> 200 {"jobs": [...]}, newest first, [] when none (no parameter: all jobs)
//	POST /jobs/<id>/cancel        202 {} while the job runs; 409 {"error":"job already finished"}; 404
//	                              (409 {"error":"job <id> cannot be cancelled while it runs"} with on_cancel refuse)
//	POST /jobs/<id>/answers       200 job document; 409 when finished; 404; 422 for a bad action
//
// A cancel applies the job's on_cancel: "cancel" ends it "cancelled", "ignore"
// acknowledges the request and lets the job run on, "finish" ends it
// "succeeded" with its output, "refuse" answers 409 while the job runs and
// lets it run on (a backend that will not stop a job in a protected phase). The answers body is
//
//	{"answers": {"<key>": {"action": "accept|decline|cancel", "content": {...}}}}
//
// Answers to keys that are not outstanding (not asked yet, already answered,
// unknown) are ignored, so a replay is harmless. Content is not validated
// against the schema. Other paths answer 404 and other methods 405 with an
// Allow header, both with an {"error": ...} body.
//
// # Callbacks
//
// With [Options.Callbacks] the server calls a URL back on each change of a
// job's state (a new status, or a new set of outstanding questions), as job
// APIs with webhooks do: a POST whose body is the job document at that
// moment (Content-Type application/json), signed with a shared secret.
// By default it follows Standard Webhooks:
//
//	webhook-id:        msg_<random>_<job seq>_<n>   (the same on a redelivery)
//	webhook-timestamp: 1796119200                   (Unix seconds of this attempt)
//	webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">
//
// with the secret written "whsec_<base64 key>". The hmac_sha256_hex and
// hmac_sha256_base64 schemes send the HMAC-SHA256 of the body (of
// "<timestamp>.<body>" with a timestamp header) in one header, after an
// optional prefix such as "sha256=". A background sender looks for changes
// after each request and every [Callbacks.Interval]; with a negative interval
// nothing is sent until the test calls [Server.SendCallbacks]. A failed
// delivery is not retried on its own: [Server.Redeliver] sends one again (the
// same ID and body, signed anew, with a timestamp the test may set in the
// past), and [Server.Deliveries] lists them. With the environment variable
// JOBBRIDGE_EXCHANGES set (package exchanges) every attempt is recorded with
// backend "jobapi-callbacks" and the scheme as its operation.
//
// # Test hooks
//
// [Server.Submissions], [Server.Cancels], [Server.Answers] and
// [Server.Requests] count what the server received; [Server.Purge] forgets a
// job; [Server.Inject] scripts failures (a status such as 503 or 429 with
// Retry-After, optionally after the request has taken effect, or a dropped
// connection) and unusual answers (a scripted body and Location header, so
// a 201 without a job ID, a Location on another origin, a 200 status answer
// without the status field or a refusal with a JSON message);
// [Server.InjectUntil] keeps a fault until it is removed (a throttled API).
// Note that Go's http.Transport silently retries a replayable
// request (a GET, or any request with an Idempotency-Key header) once when a
// reused keep-alive connection is dropped, so a single Drop fault may go
// unseen by such a client.
package jobapi
