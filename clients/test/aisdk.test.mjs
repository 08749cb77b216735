// The Vercel AI SDK's MCP client (@ai-sdk/mcp, pinned in package.json)
// against the real binary over Streamable HTTP, used as an agent built on
// the AI SDK uses it: createMCPClient, tools(), then each tool's execute,
// and what the model is handed is the tool's toModelOutput of the result
// (the text blocks). It speaks protocol 2026-07-28 but declares no tasks
// extension and, by default, no elicitation: every call is a plain
// tools/call. So a job longer than the tool's sync_budget reaches it only
// through the handle mode (after_sync_budget: return_handle): the handle,
// then task_status; a confirmation it cannot be asked for waits in the
// task until task_answer gives an explicit true.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createMCPClient } from "@ai-sdk/mcp";
import { startHTTP, jobs, toolNames } from "../lib/jobbridge.mjs";

const timeout = 30000;

describe("@ai-sdk/mcp (no tasks) over http", () => {
  let server;
  let client;
  let tools;
  let calls = 0;
  before(async () => {
    server = await startHTTP();
    client = await createMCPClient({ transport: { type: "http", url: server.url.href } });
    tools = await client.tools();
  });
  after(async () => {
    await client?.close();
    await server?.stop();
  });

  /** Runs a tool as the AI SDK does; returns the result and what the model sees. */
  async function run(name, input) {
    const t = tools[name];
    assert.ok(t, `tool ${name} among ${Object.keys(tools)}`);
    const options = { toolCallId: `call-${++calls}`, messages: [] };
    const output = await t.execute(input, options);
    const model = await t.toModelOutput({ toolCallId: options.toolCallId, input, output });
    const seen = model.type === "content" ? model.value.map((p) => p.text ?? JSON.stringify(p)).join("\n") : JSON.stringify(model.value);
    return { output, seen };
  }

  /** The task ID a handle names, read from what the model sees. */
  function handleOf(seen) {
    const m = /goes on as task (\S+?)\./.exec(seen);
    assert.ok(m, `the model is told the task's ID: ${seen}`);
    return m[1];
  }

  /** Calls task_status until the task has ended; returns the last run. */
  async function statusUntilEnded(taskId) {
    for (;;) {
      const r = await run("task_status", { task_id: taskId });
      if (!/The task is still running|waits for/.test(r.seen)) return r;
      await new Promise((res) => setTimeout(res, 250));
    }
  }

  test("lists the tools and the companion tools", { timeout }, async () => {
    assert.deepEqual(Object.keys(tools).sort(), toolNames);
  });

  test("a job longer than the sync budget: the handle, then its result with summary and link", { timeout }, async () => {
    const { output, seen } = await run("slow_report", { label: "ai" });
    assert.equal(output.isError ?? false, false, seen);
    assert.match(seen, /still running after 1s/);
    const taskId = handleOf(seen);
    const done = await statusUntilEnded(taskId);
    assert.equal(done.output.isError ?? false, false, done.seen);
    assert.match(done.seen, /^Report ai is ready\./);
    assert.match(done.seen, /Job: http:\/\/127\.0\.0\.1:\d+\/jobs\/\S+/, "the job's link");
    assert.match(done.seen, /"rows":1284/, "the job's data");
  });

  test("a job that fails: its reason", { timeout }, async () => {
    const first = await run("slow_failure", {});
    const done = await statusUntilEnded(handleOf(first.seen));
    assert.equal(done.output.isError, true, done.seen);
    assert.match(done.seen, /Export failed\./);
    assert.match(done.seen, /Reason: export failed: disk quota exceeded/);
    const quick = await run("broken_export", {});
    assert.equal(quick.output.isError, true);
    assert.match(quick.seen, /disk quota exceeded/);
  });

  test("no job without a confirmation", { timeout }, async () => {
    const before = await jobs(server.jobAPI);
    // A confirm: tool without the handle mode refuses a client that cannot
    // be asked: no job.
    await assert.rejects(run("confirm_delete", { filename: "ai.txt" }), /elicitation/);
    // With it, the task waits for the confirmation, and only an explicit
    // true submits the job.
    const first = await run("confirm_purge", { target: "ai" });
    assert.equal(first.output.isError ?? false, false, first.seen);
    assert.match(first.seen, /waits for the user's confirmation: "Purge the ai cache\?"/);
    assert.match(first.seen, /Nothing has been submitted/);
    const taskId = handleOf(first.seen);
    for (const answers of [{ confirm: false }, { "jobbridge.confirm": { confirm: "true" } }]) {
      const r = await run("task_answer", { task_id: taskId, answers });
      assert.match(r.seen, /did not settle the question/, `answers ${JSON.stringify(answers)}: ${r.seen}`);
    }
    assert.equal((await jobs(server.jobAPI)).size, before.size, "no job before an explicit true");
    const yes = await run("task_answer", { task_id: taskId, answers: { "jobbridge.confirm": { confirm: true } } });
    assert.equal(yes.output.isError ?? false, false, yes.seen);
    const done = await statusUntilEnded(taskId);
    assert.match(done.seen, /^Purged the ai cache\./);
    assert.equal((await jobs(server.jobAPI)).size, before.size + 1, "one job after the confirmation");
  });

  test("task_cancel stops a job that goes on as a task", { timeout }, async () => {
    const first = await run("slow_report", { label: "stop" });
    const taskId = handleOf(first.seen);
    const cancelled = await run("task_cancel", { task_id: taskId });
    assert.match(cancelled.seen, /cancel/i);
    const done = await statusUntilEnded(taskId);
    assert.equal(done.output.isError, true);
    assert.match(done.seen, /The task was cancelled/);
  });
});
