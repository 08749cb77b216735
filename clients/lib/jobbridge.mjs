// Starting the real jobbridge binary for the client tests, and reading the
// REST job API fake that its demo mode points every tool at.
//
// clients/run.sh builds the binary and sets JOBBRIDGE_BIN; the catalog is
// clients/catalog.yaml. Over HTTP the demo listens on a free loopback port
// (--listen 127.0.0.1:0) and names its endpoint and the fake on stderr; over
// stdio the client spawns `jobbridge demo --stdio` and the fake's address is
// read from the child's stderr the same way.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import path from "node:path";
import assert from "node:assert/strict";

const here = path.dirname(fileURLToPath(import.meta.url));
export const catalog = path.join(here, "..", "catalog.yaml");

/** The jobbridge binary under test. */
export function binary() {
  const bin = process.env.JOBBRIDGE_BIN;
  if (!bin) throw new Error("JOBBRIDGE_BIN is not set: run the tests through clients/run.sh");
  return bin;
}

/** The command and arguments a stdio client spawns. */
export function stdioCommand() {
  return { command: binary(), args: ["demo", "--stdio", "--config", catalog, "--log-level", "warn"] };
}

const fakeLine = /REST job API (http:\/\/\S+?),/;
const urlLine = /msg="serving MCP" url=(\S+)/;
const issuerLine = /-d resource=\S+ (http:\/\/\S+)\/token/;

/**
 * Collects the text of a stream and resolves the first match of each
 * pattern; rejects if the stream ends first or after timeoutMs.
 */
export function watch(stream, patterns, timeoutMs = 15000) {
  let text = "";
  const waiters = Object.entries(patterns).map(([name, re]) => {
    let resolve, reject;
    const p = new Promise((res, rej) => ((resolve = res), (reject = rej)));
    return { name, re, p, resolve, reject, done: false };
  });
  const check = () => {
    for (const w of waiters) {
      const m = !w.done && w.re.exec(text);
      if (m) {
        w.done = true;
        w.resolve(m[1]);
      }
    }
  };
  stream.setEncoding?.("utf8");
  stream.on("data", (chunk) => {
    text += chunk;
    check();
  });
  const fail = (why) => {
    for (const w of waiters) if (!w.done) w.reject(new Error(`${why} before it named ${w.name}; it said:\n${text}`));
  };
  stream.on("end", () => fail("the server's output ended"));
  const timer = setTimeout(() => fail(`no answer within ${timeoutMs} ms`), timeoutMs);
  timer.unref();
  return {
    text: () => text,
    ...Object.fromEntries(waiters.map((w) => [w.name, w.p])),
  };
}

/** The fake's address, read from a stdio child's piped stderr. */
export function fakeFromStderr(stderr) {
  return watch(stderr, { jobAPI: fakeLine }).jobAPI;
}

/**
 * Starts `jobbridge demo` on a free loopback port. With auth, the demo's
 * built-in test issuer signs tokens for any client_id (the principal).
 */
export async function startHTTP({ auth = false } = {}) {
  const args = ["demo", "--config", catalog, "--listen", "127.0.0.1:0", "--log-level", "info"];
  if (auth) args.push("--auth");
  const child = spawn(binary(), args, { stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise((res) => child.once("exit", res));
  const err = watch(child.stderr, { url: urlLine, jobAPI: fakeLine });
  const out = auth ? watch(child.stdout, { issuer: issuerLine }) : null;
  if (!auth) child.stdout.resume();
  try {
    const [url, jobAPI, issuer] = await Promise.all([err.url, err.jobAPI, out?.issuer]);
    return {
      url: new URL(url),
      jobAPI,
      issuer,
      log: () => err.text(),
      /** A bearer token for the principal named clientId. */
      async token(clientId) {
        const res = await fetch(`${issuer}/token`, {
          method: "POST",
          body: new URLSearchParams({ grant_type: "client_credentials", client_id: clientId, resource: url }),
        });
        assert.equal(res.status, 200, `token for ${clientId}: HTTP ${res.status}`);
        return (await res.json()).access_token;
      },
      async stop() {
        if (child.exitCode === null) child.kill("SIGTERM");
        await exited;
      },
    };
  } catch (e) {
    child.kill("SIGKILL");
    throw e;
  }
}

/** Every job the REST job API fake knows, keyed by ID. */
export async function jobs(jobAPI) {
  const res = await fetch(`${jobAPI}/jobs`);
  assert.equal(res.status, 200, `GET /jobs on the fake: HTTP ${res.status}`);
  const body = await res.json();
  return new Map(body.jobs.map((j) => [j.id, j]));
}

/** Polls until check() returns a value other than undefined. */
export async function eventually(what, check, { timeoutMs = 10000, everyMs = 100 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await check();
    if (last !== undefined && last !== false) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * Waits for exactly one job the fake did not know in `before` and returns
 * it (the bridge submits in the background, after the task handle).
 */
export async function newJob(jobAPI, before) {
  return eventually("the job to reach the REST job API fake", async () => {
    const fresh = [...(await jobs(jobAPI)).values()].filter((j) => !before.has(j.id));
    assert.ok(fresh.length <= 1, `expected one new job on the fake, found ${fresh.length}`);
    return fresh[0];
  });
}

/** Waits until the fake reports the job in the given status. */
export async function jobReaches(jobAPI, id, status) {
  return eventually(`job ${id} to be ${status} on the REST job API fake`, async () => {
    const res = await fetch(`${jobAPI}/jobs/${id}`);
    assert.equal(res.status, 200, `GET /jobs/${id} on the fake: HTTP ${res.status}`);
    const job = await res.json();
    return job.status === status ? job : undefined;
  });
}

/** The text of a tool result's content. */
export function text(result) {
  return (result?.content ?? [])
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("\n");
}

/**
 * The tools the server lists for clients/catalog.yaml: its seven, and the
 * companion tools of the handle mode, which its slow_report, slow_failure
 * and confirm_purge use.
 */
export const toolNames = [
  "broken_export",
  "confirm_delete",
  "confirm_purge",
  "long_migration",
  "quick_report",
  "slow_failure",
  "slow_report",
  "task_answer",
  "task_cancel",
  "task_status",
];

/**
 * Checks a quick_report result for the label: its structured content is
 * the result (summary, outcome, the job's data), and its text carries the
 * same, the summary first.
 */
export function assertReport(result, label) {
  const sc = result.structuredContent;
  assert.equal(sc?.summary, `Report ${label} is ready.`, JSON.stringify(result));
  assert.equal(sc.outcome, "succeeded");
  assert.deepEqual(sc.data, { label });
  const t = text(result);
  assert.equal(t.split("\n")[0], `Report ${label} is ready.`, t);
  assert.ok(t.includes(`Data: ${JSON.stringify({ label })}`), `the text carries the data: ${t}`);
}
