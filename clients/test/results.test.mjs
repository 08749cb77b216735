// What a model sees of jobbridge's results through the v1 SDK client
// (@modelcontextprotocol/sdk, protocol 2025-11-25), read as the two kinds
// of agent client read them: one that hands the model only
// structuredContent (Claude Code, reportedly VS Code: JSON.stringify of it,
// text blocks dropped) and one that reads only the text blocks. Both must
// see the summary, the job's link and, for a failure, its reason: for a
// long job followed as a task, for a job that fails, and for a long job
// called without a task (the handle, then task_status).
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startHTTP, text } from "../lib/jobbridge.mjs";
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
    // The SDK validates a result against the tool's listed outputSchema
    // (the envelope, data typed by the catalog): the handle conforms too.
    const handle = await c.client.callTool({ name: "slow_report", arguments: { label: "q4" } });
    assert.equal(handle.isError ?? false, false, JSON.stringify(handle));
    const taskId = handle.structuredContent.task?.id;
    assert.ok(taskId, `a handle: ${JSON.stringify(handle)}`);
    seenByBoth(handle, ["still running", taskId, "task_status"]);
    let result;
    for (;;) {
      result = await c.client.callTool({ name: "task_status", arguments: { task_id: taskId } });
      if (result.structuredContent.outcome !== "running") break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(result.structuredContent.outcome, "succeeded", JSON.stringify(result));
    seenByBoth(result, ["Report q4 is ready.", result.structuredContent.job.url, "1284"]);
  });
});
