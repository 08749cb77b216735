#!/usr/bin/env node
// Checks HTTP exchanges recorded by the fakes against the official API
// descriptions: GitHub's OpenAPI description (@octokit/openapi), the AWS
// Batch service model (aws-sdk v2 model, enums and errors from the v3 client)
// and, for the job API fake's signed callbacks, the Standard Webhooks
// specification with its reference library (standardwebhooks).
//
// Usage: node check.mjs [--require github,batch,jobapi-callbacks] DIR
//
// Reads every *.jsonl file in DIR (one exchange per line, the format of
// JOBBRIDGE_EXCHANGES), prints for each backend how many exchanges were
// checked and how many violations were found, the known exceptions hit, and
// each violation with its exchange (method path status) and schema path.
// Exits 1 on any violation, on an unreadable line, and (with --require) when
// a required backend has no exchange at all (for github and batch: also no
// event delivery), so that a recorder that writes nothing cannot pass.

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

// checkDir checks every exchange in dir. It returns the report lines and
// whether the run passed; it prints nothing itself. callbackSecrets, when
// given, replaces the test secrets the callbacks are verified under.
export async function checkDir(dir, { require: required = [], callbackSecrets } = {}) {
  // The GitHub and Batch fakes also record the event deliveries they send
  // (an exchange whose check says kind "event"); --require github or batch
  // needs one of those too. Every callback is an event delivery.
  const backends = {
    github: { checked: 0, violations: [], exceptions: new Map(), check: null, events: 0, requireEvents: true },
    batch: { checked: 0, violations: [], exceptions: new Map(), check: null, events: 0, requireEvents: true },
    "jobapi-callbacks": { checked: 0, violations: [], exceptions: new Map(), check: null, events: 0, verified: 0 },
  };
  const loaders = {
    github: async () => (await import("./lib/github.mjs")).checkGithubExchange,
    batch: async () => (await import("./lib/batch.mjs")).checkBatchExchange,
    "jobapi-callbacks": async () => {
      const { checkCallbackExchange } = await import("./lib/callbacks.mjs");
      const opts = callbackSecrets ? { secrets: callbackSecrets } : {};
      return (x) => checkCallbackExchange(x, opts);
    },
  };
  const problems = [];
  const files = readdirSync(dir).filter((f) => f.endsWith(".jsonl")).sort();
  for (const f of files) {
    const lines = readFileSync(join(dir, f), "utf8").split("\n");
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i].trim();
      if (line === "") continue;
      let x;
      try {
        x = JSON.parse(line);
      } catch (e) {
        problems.push(`${f}:${i + 1}: not a JSON object: ${e.message}`);
        continue;
      }
      const b = Object.hasOwn(backends, x.backend) ? backends[x.backend] : undefined;
      if (!b) {
        problems.push(`${f}:${i + 1}: unknown backend ${JSON.stringify(x.backend)}`);
        continue;
      }
      if (!b.check) b.check = await loaders[x.backend]();
      b.checked++;
      let res;
      try {
        res = b.check(x);
      } catch (e) {
        res = { violations: [{ where: "checker", message: "checker failed: " + (e.stack || e), schemaPath: "" }], exceptions: [] };
      }
      const label = `${x.method} ${x.path}${x.query ? "?" + x.query : ""} ${x.status}${x.operation ? " (" + x.operation + ")" : ""}${x.injected ? " [injected]" : ""}`;
      if (res.kind === "event") b.events = (b.events || 0) + 1;
      if (res.verified) b.verified++;
      for (const v of res.violations) b.violations.push({ file: f, line: i + 1, label, ...v });
      for (const e of res.exceptions) b.exceptions.set(e, (b.exceptions.get(e) || 0) + 1);
    }
  }
  const out = [];
  let ok = problems.length === 0;
  const { GITHUB_EXCEPTIONS, GITHUB_HTTP_RULES } = backends.github.exceptions.size
    ? await import("./lib/github.mjs")
    : { GITHUB_EXCEPTIONS: {}, GITHUB_HTTP_RULES: {} };
  const { CALLBACK_EXCEPTIONS } = backends["jobapi-callbacks"].exceptions.size
    ? await import("./lib/callbacks.mjs")
    : { CALLBACK_EXCEPTIONS: {} };
  const BATCH_EXCEPTIONS = {
    "batch-JobDetail.startedAt-before-start":
      "the model marks JobDetail.startedAt required, but a job whose container never started has no start time and the service leaves it out",
  };
  for (const [name, b] of Object.entries(backends)) {
    out.push(`${name}: ${b.checked} exchanges checked, ${b.violations.length} violations`);
    if (b.verified !== undefined) {
      if (b.checked) out.push(`  of which ${b.verified} with a verified signature`);
    } else if (b.events) out.push(`  of which ${b.events} event deliveries`);
    for (const [e, n] of b.exceptions) {
      if (GITHUB_EXCEPTIONS[e]) out.push(`  known exception ${e} (${n}x): ${GITHUB_EXCEPTIONS[e]}`);
      else if (BATCH_EXCEPTIONS[e]) out.push(`  known exception ${e} (${n}x): ${BATCH_EXCEPTIONS[e]}`);
      else if (CALLBACK_EXCEPTIONS[e]) out.push(`  known exception ${e} (${n}x): ${CALLBACK_EXCEPTIONS[e]}`);
      else out.push(`  HTTP rule ${e} (${n}x): ${GITHUB_HTTP_RULES[e] || ""}`);
    }
    for (const v of b.violations) {
      out.push(`  VIOLATION ${v.label} [${v.file}:${v.line}]`);
      out.push(`    at ${v.where}: ${v.message}`);
      if (v.schemaPath) out.push(`    schema: ${v.schemaPath}`);
    }
    if (b.violations.length) ok = false;
    if (required.includes(name) && b.checked === 0) {
      out.push(`  FAIL: no ${name} exchange recorded (is the recorder writing to JOBBRIDGE_EXCHANGES?)`);
      ok = false;
    } else if (required.includes(name) && b.requireEvents && !b.events) {
      out.push(`  FAIL: no ${name} event delivery recorded (does the fake record what it sends?)`);
      ok = false;
    }
  }
  for (const p of problems) out.push("ERROR " + p);
  if (files.length === 0) out.push(`(no *.jsonl file in ${dir})`);
  return { ok, lines: out, backends };
}

async function main(argv) {
  const args = [...argv];
  let required = [];
  const i = args.indexOf("--require");
  if (i >= 0) {
    required = (args[i + 1] || "").split(",").filter(Boolean);
    args.splice(i, 2);
  }
  if (args.length !== 1) {
    console.error("usage: node check.mjs [--require github,batch,jobapi-callbacks] DIR");
    return 2;
  }
  const { ok, lines } = await checkDir(args[0], { require: required });
  console.log(lines.join("\n"));
  console.log(ok ? "spec-check: OK" : "spec-check: FAILED");
  return ok ? 0 : 1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}
