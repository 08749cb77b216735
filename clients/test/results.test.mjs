// What a model sees of jobbridge's results through the v1 SDK client
// (@modelcontextprotocol/sdk, protocol 2025-11-25), read as the two kinds
// of agent client read them: one that hands the model only
// structuredContent (Claude Code, reportedly VS Code: JSON.stringify of it,
// text blocks dropped) and one that reads only the text blocks. Both must
// see the summary, the job's link and, for a failure, its reason: for a
// long job followed as a task, for a job that fails, and for a long job
// called without a task (the handle, then task_status). Then the same
// without tasks through the 2.x client (2026-07-28) declaring no extension,
// as Claude Code calls tools in print mode and through the Agent SDK.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { startHTTP, text, jobs } from "../lib/jobbridge.mjs";
import { connectLegacy, stream, describe as show } from "../lib/legacy.mjs";

const timeout = 30000;

/** What a client that reads only structuredContent hands its model. */
const structuredView = (result) => JSON.stringify(result.structuredContent ?? null);
/** What a client that reads only the text blocks hands its model. */
const textView = (result) => text(result);

const views = { "structuredContent-only": structuredView, "text-only": textView };

/** Asserts that every view of result contains each of the strings. */
function seenByBoth(result, strings) {
  for (const [reader, view] of Object.entries(views)) {
    const seen = view(result);
    for (const s of strings) assert.ok(seen.includes(s), `a ${reader} client does not see ${JSON.stringify(s)} in ${seen}`);
  }
}

describe("what v1 clients (2025-11-25) see of results", () => {
  let server;
  let c;
  before(async () => {
    server = await startHTTP();
    c = await connectLegacy("http", server);
    await c.client.listTools(); // the SDK checks results against the listed outputSchema
  });
  after(async () => {
    await c?.close();
    await server?.stop();
  });

  test("a long job followed as a task: summary, link and data in both views", { timeout }, async () => {
    const messages = await stream(c.client, "slow_report", { label: "q3" });
    const last = messages.at(-1);
    assert.equal(last.type, "result", show(messages));
    assert.equal(last.result.isError ?? false, false);
    const sc = last.result.structuredContent;
    assert.equal(sc.outcome, "succeeded");
    assert.deepEqual(sc.data, { label: "q3", rows: 1284 });
    assert.match(sc.job?.url ?? "", /\/jobs\/\S+$/, JSON.stringify(sc));
    seenByBoth(last.result, ["Report q3 is ready.", sc.job.url, "1284"]);
  });

  test("a job that fails: the reason in both views", { timeout }, async () => {
    const messages = await stream(c.client, "slow_failure", {});
    const last = messages.at(-1);
    assert.equal(last.type, "result", show(messages));
    assert.equal(last.result.isError, true);
    assert.equal(last.result.structuredContent.outcome, "failed");
    assert.equal(last.result.structuredContent.reason, "export failed: disk quota exceeded");
    seenByBoth(last.result, ["Export failed.", "export failed: disk quota exceeded", last.result.structuredContent.job.url]);
  });

  test("a job that fails within a plain call: the reason in both views", { timeout }, async () => {
    const result = await c.client.callTool({ name: "broken_export", arguments: {} });
    assert.equal(result.isError, true);
    seenByBoth(result, ["disk quota exceeded"]);
    assert.equal(result.structuredContent.reason, "export failed: disk quota exceeded");
  });

  test("a long job called without a task: the handle, then task_status gives the result", { timeout }, async () => {
    await handleFlow(c.client, "q4");
  });
});

/**
 * Calls slow_report without a task: at its budget the handle (which the
 * client checks against the tool's listed outputSchema, the envelope with
 * data typed by the catalog), then task_status until the result.
 */
async function handleFlow(client, label) {
  const handle = await client.callTool({ name: "slow_report", arguments: { label } });
  assert.equal(handle.isError ?? false, false, JSON.stringify(handle));
  assert.equal(handle.structuredContent.outcome, "running");
  const taskId = handle.structuredContent.task?.id;
  assert.ok(taskId, `a handle: ${JSON.stringify(handle)}`);
  seenByBoth(handle, ["still running", taskId, "task_status"]);
  const result = await statusUntilEnded(client, taskId);
  assert.equal(result.structuredContent.outcome, "succeeded", JSON.stringify(result));
  seenByBoth(result, [`Report ${label} is ready.`, result.structuredContent.job.url, "1284"]);
}

async function statusUntilEnded(client, taskId) {
  for (;;) {
    const result = await client.callTool({ name: "task_status", arguments: { task_id: taskId } });
    if (!["running", "input_required"].includes(result.structuredContent.outcome)) return result;
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe("a v1 client (2025-11-25) over stdio calling without a task", () => {
  let c;
  before(async () => {
    c = await connectLegacy("stdio");
    await c.client.listTools();
  });
  after(async () => {
    await c?.close();
  });

  test("a long job: the handle, then task_status gives the result", { timeout }, async () => {
    await handleFlow(c.client, "stdio");
  });
});

describe("a 2.x client (2026-07-28) without the tasks extension, as Claude Code calls in print mode", () => {
  let server;
  let client;
  before(async () => {
    server = await startHTTP();
    client = new Client({ name: "jobbridge-clients-headless", version: "0.0.0" }, { capabilities: {}, versionNegotiation: { mode: { pin: "2026-07-28" } } });
    await client.connect(new StreamableHTTPClientTransport(server.url));
    await client.listTools();
  });
  after(async () => {
    await client?.close();
    await server?.stop();
  });

  test("a long job: the handle, then task_status gives the result", { timeout }, async () => {
    await handleFlow(client, "headless");
  });

  test("a job that fails after the budget: its reason", { timeout }, async () => {
    const handle = await client.callTool({ name: "slow_failure", arguments: {} });
    const result = await statusUntilEnded(client, handle.structuredContent.task.id);
    assert.equal(result.isError, true);
    seenByBoth(result, ["Export failed.", "export failed: disk quota exceeded"]);
  });

  test("no job without a confirmation", { timeout }, async () => {
    const before = (await jobs(server.jobAPI)).size;
    const handle = await client.callTool({ name: "confirm_purge", arguments: { target: "headless" } });
    assert.equal(handle.structuredContent.outcome, "input_required", JSON.stringify(handle));
    seenByBoth(handle, ["Purge the headless cache?", "Nothing has been submitted"]);
    const taskId = handle.structuredContent.task.id;
    const refused = await client.callTool({ name: "task_answer", arguments: { task_id: taskId, answers: { action: "decline" } } });
    assert.equal(refused.structuredContent.outcome, "cancelled", JSON.stringify(refused));
    seenByBoth(refused, ["declined", "no job was submitted"]);
    assert.equal((await jobs(server.jobAPI)).size, before, "no job was submitted");
  });
});
