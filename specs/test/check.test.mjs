// Tests of the spec checker on hand-made exchange files in testdata/: the
// valid ones must pass (hitting only the listed known exceptions), each
// invalid one must be reported with the violation it carries, and a run that
// recorded nothing for a required backend must fail.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, copyFileSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnSync } from "node:child_process";
import { checkDir } from "../check.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const testdata = join(here, "..", "testdata");

// withFiles copies the named testdata files into a fresh directory.
function withFiles(names) {
  const dir = mkdtempSync(join(tmpdir(), "spec-check-"));
  for (const n of names) copyFileSync(join(testdata, n), join(dir, n.replace(/\//g, "_")));
  return dir;
}

test("valid GitHub and Batch exchanges pass, hitting only the two listed exceptions and the HTTP rules", async () => {
  const dir = withFiles(["valid/github.jsonl", "valid/github-webhooks.jsonl", "valid/batch.jsonl", "valid/batch-events.jsonl"]);
  try {
    const r = await checkDir(dir, { require: ["github", "batch"] });
    assert.equal(r.ok, true, r.lines.join("\n"));
    assert.equal(r.backends.github.checked, 17);
    assert.equal(r.backends.github.events, 8);
    assert.equal(r.backends.batch.checked, 10);
    assert.equal(r.backends.batch.events, 5);
    assert.deepEqual([...r.backends.github.exceptions.keys()].sort(), ["created-search-syntax", "http-304-conditional", "http-error-shared-answer", "workflow_id-oneOf"]);
    assert.match(r.lines.join("\n"), /^github: 17 exchanges checked, 0 violations$/m);
    assert.match(r.lines.join("\n"), /^batch: 10 exchanges checked, 0 violations$/m);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

const invalid = [
  { file: "invalid/github-dispatch-missing-ref.jsonl", backend: "github", where: "request.body", message: /required property 'ref'/, schema: /dispatches\/post\/requestBody/ },
  { file: "invalid/github-run-missing-head-commit.jsonl", backend: "github", where: "response.body", message: /required property 'head_commit'/, schema: /runs~1\{run_id\}\/get\/responses\/200/ },
  { file: "invalid/github-undocumented-status.jsonl", backend: "github", where: "response.status", message: /status 201 is not documented/, schema: /responses$/ },
  { file: "invalid/github-304-unconditional.jsonl", backend: "github", where: "response.status", message: /status 304 is not documented/, schema: /responses$/ },
  { file: "invalid/github-422-not-an-error-object.jsonl", backend: "github", where: "response.body", message: /required property 'message'/, schema: /components\/responses\/validation_failed/, count: 2 },
  { file: "invalid/batch-submit-missing-jobqueue.jsonl", backend: "batch", where: "request.body.jobQueue", message: /required member jobQueue is missing/, schema: /required/ },
  { file: "invalid/batch-undeclared-error.jsonl", backend: "batch", where: "response.error", message: /does not declare error ServiceUnavailableException .*no AWS common error/, schema: /DescribeJobs\.errors/ },
  { file: "invalid/batch-injected-undeclared-error.jsonl", backend: "batch", where: "response.error", message: /does not declare error ServiceUnavailableException/, schema: /DescribeJobs\.errors/ },
  { file: "invalid/github-422-without-ratelimit-headers.jsonl", backend: "github", where: "response.headers.x-ratelimit-limit", message: /422 answer has no x-ratelimit-limit header/, schema: /x-ratelimit/, count: 5 },
  { file: "invalid/batch-bad-enum.jsonl", backend: "batch", where: "response.body.jobs[0].status", message: /"CANCELLED" is not one of JobStatus/, schema: /enum JobStatus/ },
  { file: "invalid/batch-running-without-startedat.jsonl", backend: "batch", where: "response.body.jobs[0].startedAt", message: /required member startedAt is missing/, schema: /required/ },
  { file: "invalid/batch-server-exception-status.jsonl", backend: "batch", where: "response.status", message: /ServerException is HTTP 500 in the model, got 503/, schema: /ServerException/ },
];

for (const c of invalid) {
  test(`reports ${c.file}`, async () => {
    const dir = withFiles([c.file]);
    try {
      const r = await checkDir(dir);
      assert.equal(r.ok, false);
      const vs = r.backends[c.backend].violations;
      assert.equal(vs.length, c.count || 1, r.lines.join("\n"));
      assert.equal(vs[0].where, c.where);
      assert.match(vs[0].message, c.message);
      assert.match(vs[0].schemaPath, c.schema);
      assert.match(r.lines.join("\n"), new RegExp(`^${c.backend}: 1 exchanges checked, ${c.count || 1} violations$`, "m"));
      assert.match(r.lines.join("\n"), /VIOLATION (POST|GET) \/\S+ \d{3}/);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });
}

test("AWS's common errors and Batch's throttling error pass on any operation, with their statuses", async () => {
  const { checkBatchExchange } = await import("../lib/batch.mjs");
  const answer = (status, type, injected) => ({
    backend: "batch", method: "POST", path: "/v1/describejobs", query: "", request_headers: { "Content-Type": ["application/json"] },
    request_body: JSON.stringify({ jobs: ["0d3b1e2a-6c1f-4f7e-9a55-1b2c3d4e5f60"] }), status,
    response_headers: { "Content-Type": ["application/json"], "X-Amzn-Requestid": ["8f7c9d2e-1111-4a5b-9c3d-0e1f2a3b4c5d"], "X-Amzn-Errortype": [type] },
    response_body: JSON.stringify({ __type: type, message: "m" }), operation: "DescribeJobs", injected,
  });
  for (const injected of [false, true]) {
    for (const [status, type] of [[429, "TooManyRequestsException"], [503, "ServiceUnavailable"], [403, "UnrecognizedClientException"], [403, "ExpiredTokenException"], [500, "ServerException"]]) {
      assert.deepEqual(checkBatchExchange(answer(status, type, injected)).violations, [], `${status} ${type}${injected ? " (injected)" : ""}`);
    }
    const wrong = checkBatchExchange(answer(500, "ServiceUnavailable", injected)).violations;
    assert.equal(wrong.length, 1, JSON.stringify(wrong));
    assert.match(wrong[0].message, /ServiceUnavailable is HTTP 503 among AWS's common errors, got 500/);
  }
});

test("an injected fault's answer is not validated, its request still is", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spec-check-"));
  try {
    const x = {
      backend: "batch", method: "POST", path: "/v1/submitjob", query: "", request_headers: {},
      request_body: JSON.stringify({ jobName: "a", jobDefinition: "d" }), status: 500,
      response_headers: {}, response_body: "not json at all", operation: "SubmitJob", injected: true,
    };
    writeFileSync(join(dir, "batch-1.jsonl"), JSON.stringify(x) + "\n");
    const r = await checkDir(dir);
    assert.deepEqual(r.backends.batch.violations.map((v) => v.where), ["request.body.jobQueue"]);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

const cli = [
  { name: "valid files exit 0", files: ["valid/github.jsonl", "valid/github-webhooks.jsonl", "valid/batch.jsonl", "valid/batch-events.jsonl", "valid/jobapi-callbacks.jsonl"], args: ["--require", "github,batch,jobapi-callbacks"], code: 0 },
  { name: "no callback with --require jobapi-callbacks exits 1", files: ["valid/github.jsonl", "valid/github-webhooks.jsonl", "valid/batch.jsonl", "valid/batch-events.jsonl"], args: ["--require", "github,batch,jobapi-callbacks"], code: 1, out: /no jobapi-callbacks exchange recorded/ },
  { name: "a callback with a bad signature exits 1", files: ["valid/jobapi-callbacks.jsonl", "invalid/jobapi-callbacks-bad-signature.jsonl"], args: ["--require", "jobapi-callbacks"], code: 1, out: /VIOLATION POST \/events\/jobs 204 \(standard_webhooks\)/ },
  { name: "a violation exits 1", files: ["invalid/batch-submit-missing-jobqueue.jsonl"], args: [], code: 1 },
  { name: "no GitHub exchange with --require github exits 1", files: ["valid/batch.jsonl"], args: ["--require", "github,batch"], code: 1, out: /no github exchange recorded/ },
  { name: "an empty directory with --require exits 1", files: [], args: ["--require", "github,batch"], code: 1 },
  { name: "an empty directory without --require exits 0", files: [], args: [], code: 0 },
];

for (const c of cli) {
  test(`check.mjs: ${c.name}`, () => {
    const dir = withFiles(c.files);
    try {
      const p = spawnSync(process.execPath, [join(here, "..", "check.mjs"), ...c.args, dir], { encoding: "utf8" });
      assert.equal(p.status, c.code, p.stdout + p.stderr);
      if (c.out) assert.match(p.stdout, c.out);
      assert.match(p.stdout, /^github: \d+ exchanges checked, \d+ violations$/m);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });
}

test("a line that is not JSON fails the run", async () => {
  const dir = mkdtempSync(join(tmpdir(), "spec-check-"));
  try {
    writeFileSync(join(dir, "github-1.jsonl"), '{"backend":"github"\n');
    const r = await checkDir(dir);
    assert.equal(r.ok, false);
    assert.match(r.lines.join("\n"), /github-1\.jsonl:1: not a JSON object/);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test("the created exception covers search syntax only, not any string", async () => {
  const { checkGithubExchange } = await import("../lib/github.mjs");
  const cases = [
    { created: ">=2026-01-02T03:04:05Z", exception: true, violations: 0 },
    { created: "2026-01-01..2026-02-01", exception: true, violations: 0 },
    { created: "2026-01-02T03:04:05Z", exception: false, violations: 0 },
    { created: "yesterday", exception: false, violations: 1 },
    { created: ">=soon", exception: false, violations: 1 },
  ];
  for (const c of cases) {
    const r = checkGithubExchange({
      backend: "github", method: "GET", path: "/repos/o/r/actions/workflows/ci.yml/runs",
      query: new URLSearchParams({ created: c.created }).toString(), status: 200,
      response_headers: {
        "Content-Type": "application/json", "X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "4999",
        "X-RateLimit-Used": "1", "X-RateLimit-Reset": "1796119200", "X-RateLimit-Resource": "core",
      },
      response_body: JSON.stringify({ total_count: 0, workflow_runs: [] }),
      injected: false,
    });
    assert.equal(r.exceptions.includes("created-search-syntax"), c.exception, c.created);
    assert.equal(r.violations.length, c.violations, c.created + " " + JSON.stringify(r.violations));
  }
});

test("a Batch job whose container never started may leave startedAt out (the one Batch exception)", async () => {
  const dir = withFiles(["valid/batch-not-started.jsonl"]);
  try {
    const r = await checkDir(dir);
    assert.equal(r.ok, true, r.lines.join("\n"));
    assert.deepEqual([...r.backends.batch.exceptions.keys()], ["batch-JobDetail.startedAt-before-start"]);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

// GitHub webhook deliveries the fake sent (operation "webhook") are checked
// against the description's webhook payload schemas (x-webhooks), by event
// and action.
test("valid GitHub webhook deliveries pass: every workflow_run and workflow_job action, and ping", async () => {
  const dir = withFiles(["valid/github-webhooks.jsonl"]);
  try {
    const r = await checkDir(dir, { require: ["github"] });
    assert.equal(r.ok, true, r.lines.join("\n"));
    assert.equal(r.backends.github.checked, 8);
    assert.deepEqual([...r.backends.github.exceptions.keys()], []);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

const invalidWebhooks = [
  { file: "invalid/github-webhook-run-bad-conclusion.jsonl", where: "request.body/workflow_run/conclusion", message: /must be equal to one of the allowed values/, schema: /x-webhooks\/workflow-run-completed\/post\/requestBody/ },
  { file: "invalid/github-webhook-undocumented-action.jsonl", where: "request.body.action", message: /no webhook is documented for event workflow_run action "queued"/, schema: /x-webhooks/ },
];

for (const c of invalidWebhooks) {
  test(`reports ${c.file}`, async () => {
    const dir = withFiles([c.file]);
    try {
      const r = await checkDir(dir);
      assert.equal(r.ok, false);
      const vs = r.backends.github.violations;
      assert.equal(vs.length, 1, r.lines.join("\n"));
      assert.equal(vs[0].where, c.where);
      assert.match(vs[0].message, c.message);
      assert.match(vs[0].schemaPath, c.schema);
      assert.match(r.lines.join("\n"), /VIOLATION POST \/events\/github 202/);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });
}

test("a webhook delivery's headers are checked: event, GUID, hook ID, Hookshot agent, signature format", async () => {
  const { checkGithubExchange } = await import("../lib/github.mjs");
  const x = {
    backend: "github", method: "POST", path: "/events/github", query: "", operation: "webhook", status: 202,
    request_headers: { "Content-Type": ["application/json"], "User-Agent": ["curl/8"], "X-Github-Event": ["ping"], "X-Hub-Signature-256": ["sha256=abc"] },
    request_body: JSON.stringify({ zen: "Keep it logically awesome.", hook_id: 1 }), response_headers: {}, response_body: "",
  };
  const wheres = checkGithubExchange(x).violations.map((v) => v.where).sort();
  assert.deepEqual(wheres, ["request.headers.User-Agent", "request.headers.X-GitHub-Delivery", "request.headers.X-GitHub-Hook-ID", "request.headers.X-Hub-Signature-256"]);
});

// Batch event deliveries the fake sent (operation "EventDelivery"): the
// request an EventBridge API destination sends, the event envelope, and the
// detail against the model's JobDetail.
const invalidBatchEvents = [
  { file: "invalid/batch-event-exitcode-not-an-integer.jsonl", where: "request.body.detail.container.exitCode", message: /expected an integer, got string/, schema: /model integer/ },
  { file: "invalid/batch-event-missing-account.jsonl", where: "request.body.account", message: /required member account of the event envelope is missing/, schema: /envelope/ },
  { file: "invalid/batch-event-time-with-milliseconds.jsonl", where: "request.body.time", message: /in whole seconds/, schema: /envelope/ },
  { file: "invalid/batch-event-no-credential.jsonl", where: "request.headers", message: /no credential of the connection/, schema: /connection/ },
];

for (const c of invalidBatchEvents) {
  test(`reports ${c.file}`, async () => {
    const dir = withFiles([c.file]);
    try {
      const r = await checkDir(dir);
      assert.equal(r.ok, false);
      const vs = r.backends.batch.violations;
      assert.equal(vs.length, 1, r.lines.join("\n"));
      assert.equal(vs[0].where, c.where);
      assert.match(vs[0].message, c.message);
      assert.match(vs[0].schemaPath, c.schema);
      assert.equal(r.backends.batch.events, 1);
      assert.match(r.lines.join("\n"), /VIOLATION POST \/events\/batch 202 \(EventDelivery\)/);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });
}

test("GitHub REST exchanges without a webhook delivery fail --require github", async () => {
  const dir = withFiles(["valid/github.jsonl"]);
  try {
    const r = await checkDir(dir, { require: ["github"] });
    assert.equal(r.ok, false);
    assert.match(r.lines.join("\n"), /FAIL: no github event delivery recorded/);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test("Batch exchanges without an event delivery fail --require batch", async () => {
  const dir = withFiles(["valid/batch.jsonl"]);
  try {
    const r = await checkDir(dir, { require: ["batch"] });
    assert.equal(r.ok, false);
    assert.match(r.lines.join("\n"), /FAIL: no batch event delivery recorded/);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test("a Batch event delivery's headers, resources and status are checked", async () => {
  const { checkBatchExchange } = await import("../lib/batch.mjs");
  const arn = "arn:aws:batch:eu-west-1:123456789012:job/5d1e4c2a-9b7f-4e3a-8c61-2f0a7b9d3e14";
  const body = JSON.stringify({
    version: "0", id: "7a0c3e51-2b4d-4f68-9e1a-3c5b7d9f0a12", "detail-type": "Batch Job State Change", source: "aws.batch",
    account: "123456789012", time: "2026-01-02T03:04:30Z", region: "eu-west-1", resources: ["arn:aws:batch:eu-west-1:123456789012:job/other"],
    detail: { jobArn: arn, jobName: "n", jobId: "5d1e4c2a-9b7f-4e3a-8c61-2f0a7b9d3e14", jobQueue: "q", status: "SUBMITTED", jobDefinition: "d", attempts: [] },
    transformed: true,
  });
  const x = {
    backend: "batch", method: "TRACE", path: "/events/batch", query: "", operation: "EventDelivery", status: 202,
    request_headers: {
      "User-Agent": ["Go-http-client/1.1"], "Content-Type": ["application/json; charset=utf-8"], "Accept-Encoding": ["gzip,deflate"],
      Connection: ["close"], Host: ["h"], "Content-Length": [String(body.length)], "X-Jobbridge-Key": ["[redacted]"],
    },
    request_body: body, response_headers: {}, response_body: "",
  };
  const r = checkBatchExchange(x);
  assert.equal(r.kind, "event");
  assert.deepEqual(r.violations.map((v) => v.where).sort(), [
    "request.body.detail.status", "request.body.resources", "request.body.transformed",
    "request.headers.range", "request.headers.user-agent", "request.method",
  ]);
  assert.deepEqual(r.exceptions, ["batch-JobDetail.startedAt-before-start"]);
});

// The job API fake's signed callbacks (backend jobapi-callbacks, the scheme
// as operation): Standard Webhooks deliveries verified with the
// specification's reference library, the hmac schemes' header shapes and
// HMACs, as recorded by the fake's and the rest adapter's tests.
test("valid callbacks pass: every scheme verifies, a replayed one included", async () => {
  const dir = withFiles(["valid/jobapi-callbacks.jsonl"]);
  try {
    const r = await checkDir(dir, { require: ["jobapi-callbacks"] });
    assert.equal(r.ok, true, r.lines.join("\n"));
    const b = r.backends["jobapi-callbacks"];
    assert.equal(b.checked, 10);
    assert.equal(b.verified, 10);
    assert.deepEqual([...b.exceptions.keys()], []);
    assert.match(r.lines.join("\n"), /^jobapi-callbacks: 10 exchanges checked, 0 violations\n  of which 10 with a verified signature$/m);
    // The library ran with its clock at each delivery's time; the real
    // clock is back.
    assert.ok(Math.abs(Date.now() - new Date().getTime()) < 60_000);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

const invalidCallbacks = [
  { file: "invalid/jobapi-callbacks-bad-signature.jsonl", where: "request.headers.webhook-signature", message: /does not verify.*No matching signature found/, schema: /signature scheme/ },
  { file: "invalid/jobapi-callbacks-missing-timestamp.jsonl", where: "request.headers.webhook-timestamp", message: /header is missing/, schema: /webhook headers/ },
  { file: "invalid/jobapi-callbacks-timestamp-milliseconds.jsonl", where: "request.headers.webhook-timestamp", message: /not integer Unix seconds/, schema: /webhook headers/ },
  { file: "invalid/jobapi-callbacks-id-with-full-stop.jsonl", where: "request.headers.webhook-id", message: /contains a full stop/, schema: /msg_id must not contain a full stop/ },
  { file: "invalid/jobapi-callbacks-signature-not-v1.jsonl", where: "request.headers.webhook-signature", message: /neither v1,<base64 of 32 bytes> nor v1a/, schema: /signature scheme/ },
  { file: "invalid/jobapi-callbacks-hmac-bad-signature.jsonl", where: "request.headers.x-signature", message: /not the HMAC-SHA256 of the body/, schema: /hmac_sha256_\* schemes/ },
  { file: "invalid/jobapi-callbacks-hmac-uppercase-hex.jsonl", where: "request.headers", message: /no header carries the hex HMAC-SHA256 signature/, schema: /hmac_sha256_\* schemes/ },
  { file: "invalid/jobapi-callbacks-hmac-no-delivery-id.jsonl", where: "request.headers", message: /no delivery ID header/, schema: /hmac_sha256_\* schemes/ },
];

for (const c of invalidCallbacks) {
  test(`reports ${c.file}`, async () => {
    const dir = withFiles([c.file]);
    try {
      const r = await checkDir(dir);
      assert.equal(r.ok, false);
      const vs = r.backends["jobapi-callbacks"].violations;
      assert.equal(vs.length, 1, r.lines.join("\n"));
      assert.equal(vs[0].where, c.where);
      assert.match(vs[0].message, c.message);
      assert.match(vs[0].schemaPath, c.schema);
      assert.match(r.lines.join("\n"), /^jobapi-callbacks: 1 exchanges checked, 1 violations$/m);
      assert.match(r.lines.join("\n"), /VIOLATION POST \/events\/\S+ \d{3} \((standard_webhooks|hmac_sha256_hex|hmac_sha256_base64)\)/);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });
}

test("a callback is verified under the secret it was signed with, and fails under any other", async () => {
  const { checkCallbackExchange } = await import("../lib/callbacks.mjs");
  const { Webhook } = (await import("node:module")).createRequire(import.meta.url)("standardwebhooks");
  const secret = "whsec_" + Buffer.from("a-secret-no-test-uses-0123456789").toString("base64");
  const body = JSON.stringify({ id: "job-000001", status: "running" });
  const ts = 1767323045;
  const x = {
    backend: "jobapi-callbacks", method: "POST", path: "/events/jobs", query: "", operation: "standard_webhooks", status: 202,
    request_headers: {
      "Content-Type": ["application/json"], "Webhook-Id": ["msg_1"], "Webhook-Timestamp": [String(ts)],
      "Webhook-Signature": [new Webhook(secret).sign("msg_1", new Date(ts * 1000), body)],
    },
    request_body: body, response_headers: {}, response_body: "",
  };
  const signed = checkCallbackExchange(x, { secrets: [secret] });
  assert.deepEqual(signed.violations, []);
  assert.equal(signed.verified, true);
  const other = checkCallbackExchange(x); // the test secrets
  assert.deepEqual(other.violations.map((v) => v.where), ["request.headers.webhook-signature"]);
  assert.equal(other.verified, false);
  // A rotated secret: the old signature and the new one, space-delimited,
  // verify if one does.
  const rotated = structuredClone(x);
  rotated.request_headers["Webhook-Signature"] = ["v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= " + x.request_headers["Webhook-Signature"][0]];
  assert.deepEqual(checkCallbackExchange(rotated, { secrets: [secret] }).violations, []);
});

test("a callback's request is checked: POST, JSON as application/json, a known scheme", async () => {
  const { checkCallbackExchange } = await import("../lib/callbacks.mjs");
  const x = {
    backend: "jobapi-callbacks", method: "PUT", path: "/events/jobs", query: "", operation: "md5", status: 202,
    request_headers: { "Content-Type": ["text/plain"] }, request_body: "not json", response_headers: {}, response_body: "",
  };
  const r = checkCallbackExchange(x);
  assert.deepEqual(r.violations.map((v) => v.where).sort(), ["operation", "request.body", "request.headers.content-type", "request.method"]);
});
