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
  const dir = withFiles(["valid/github.jsonl", "valid/batch.jsonl"]);
  try {
    const r = await checkDir(dir, { require: ["github", "batch"] });
    assert.equal(r.ok, true, r.lines.join("\n"));
    assert.equal(r.backends.github.checked, 9);
    assert.equal(r.backends.batch.checked, 5);
    assert.deepEqual([...r.backends.github.exceptions.keys()].sort(), ["created-search-syntax", "http-304-conditional", "http-error-shared-answer", "workflow_id-oneOf"]);
    assert.match(r.lines.join("\n"), /^github: 9 exchanges checked, 0 violations$/m);
    assert.match(r.lines.join("\n"), /^batch: 5 exchanges checked, 0 violations$/m);
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
  { file: "invalid/batch-undeclared-error.jsonl", backend: "batch", where: "response.error", message: /does not declare error TooManyRequestsException/, schema: /DescribeJobs\.errors/ },
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
  { name: "valid files exit 0", files: ["valid/github.jsonl", "valid/batch.jsonl"], args: ["--require", "github,batch"], code: 0 },
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
      response_headers: { "Content-Type": "application/json" }, response_body: JSON.stringify({ total_count: 0, workflow_runs: [] }),
      injected: false,
    });
    assert.equal(r.exceptions.includes("created-search-syntax"), c.exception, c.created);
    assert.equal(r.violations.length, c.violations, c.created + " " + JSON.stringify(r.violations));
  }
});

test("a Batch job whose container never started may leave startedAt out (the one Batch exception)", async () => {
  const dir = withFiles(["valid/batch-not-started.jsonl"]);
  try {
    const r = await checkDir(dir, { require: ["batch"] });
    assert.equal(r.ok, true, r.lines.join("\n"));
    assert.deepEqual([...r.backends.batch.exceptions.keys()], ["batch-JobDetail.startedAt-before-start"]);
  } finally {
    rmSync(dir, { recursive: true });
  }
});
