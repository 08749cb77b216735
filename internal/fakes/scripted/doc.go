// Package scripted is a fake HTTP job API driven by a YAML script: the one
// mechanism behind the fakes of examples/, each of which answers as a real
// job API's documentation says (examples/NAME/fake.yaml).
//
// A script lists routes, tried in order; the first whose method, path
// pattern and matches fit a request answers it:
//
//	name: jenkins
//	auth: {accept: ["Basic amI6dG9rZW4="]}        # any other Authorization: 401
//	lifecycles:
//	  build:
//	    every: 1                                   # requests per phase (default 1)
//	    cancel: aborted                            # the phase a cancel moves to
//	    phases:
//	      - {name: queued,   fields: {executable: null}}
//	      - {name: building, fields: {executable: {number: "{job.seq}"}, building: true, result: null}}
//	      - {name: done,     fields: {building: false, result: SUCCESS}}
//	      - {name: aborted,  fields: {building: false, result: ABORTED}}
//	routes:
//	  - name: start
//	    method: POST
//	    path: /job/{name}/buildWithParameters
//	    match: {query: {BRANCH: main}}             # also headers:, body: (gjson path: value), form:, body_contains:
//	    create: {lifecycle: build, vars: {branch: "{query.BRANCH}"}}   # id: template, default {job.seq}
//	    respond: {status: 201, headers: {Location: "/queue/item/{job.id}/"}}
//	  - name: queue
//	    method: GET
//	    path: /queue/item/{id}/api/json
//	    job: "{path.id}"                           # the job the route is about (job_by: a var)
//	    advance: true                              # each answer moves the job on
//	    missing: {status: 404}                     # no such job
//	    respond: {body: {id: "{job.id}", executable: "{job.executable}"}}
//
// A job is created by a route with create: its ID is a template (default the
// fake's sequence number, {job.seq}, counting jobs from 1), its vars are
// templates over the request. It goes through its lifecycle's phases: every
// `every` answers of routes with advance: true move it to the next phase
// (after the answer). Advancing never enters the cancel phase and stops at
// the last other phase, which is final. A route with cancel: true moves an
// unfinished job to the cancel phase; delete: true removes the job after
// answering; if_job: true makes the route match only when its job exists
// (a "409 exists already" route before the creating one). Phase fields
// accumulate: a phase shows its own fields over those of the phases before
// it. The top-level anchors: key holds YAML anchors the routes share (a
// resource's shape) and is otherwise ignored.
//
// # Templates
//
// Header values and body string leaves may hold placeholders in braces:
// {path.VAR}, {query.NAME}, {header.NAME}, {form.NAME}, {body.PATH} (a gjson
// path into the request's JSON body), {job.id}, {job.seq}, {job.phase},
// {job.NAME} (a var or a phase field; {job.status.active} walks into it) and,
// in a list route, {items}. A string leaf that is exactly one placeholder
// takes the value's JSON type (null when absent); inside longer text the
// value is formatted as text. Braces around anything else are literal.
//
// A route with list: answers about every job for which each where pair's
// two templates render equal; {items} is the list of their rendered item
// templates.
//
// # Faults and records
//
// faults: (or [Fake.Inject]) answers the at-th request a named route matches
// (from 1) with a given response, without any of the route's effects. Every
// request is recorded ([Fake.Requests]) with its route, method, path, query,
// body and headers; Authorization keeps only its scheme and the headers the
// script names in secret_headers read "[redacted]".
package scripted
