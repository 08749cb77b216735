// The v1 SDK client (protocol 2025-11-25, experimental tasks) against the
// real binary, over Streamable HTTP and over stdio. What a correct server
// does is the digest in shared/reference/mcp-2025-11-25-tasks.md; the flows
// follow its §16 (what this client sends and expects).
import { describe, test, before, after } from "node:test";

// Bounds each test (and each hook): a flow that hangs fails in seconds.
const timeout = 30000;
import assert from "node:assert/strict";
import { startHTTP, jobs, newJob, jobReaches, eventually, text, toolNames, assertReport } from "../lib/jobbridge.mjs";
import { connectLegacy, stream, describe as show } from "../lib/legacy.mjs";

const related = "io.modelcontextprotocol/related-task";

for (const kind of ["http", "stdio"]) {
  describe(`v1 client (2025-11-25) over ${kind}`, () => {
    let server;
    let c;
    before(async () => {
      if (kind === "http") server = await startHTTP();
      c = await connectLegacy(kind, server);
    });
    after(async () => {
      await c?.close();
      await server?.stop();
    });

    test("plain callTool of a quick tool returns its result (no task)", { timeout }, async () => {
      await c.client.listTools();
      const result = await c.client.callTool({ name: "quick_report", arguments: { label: `sync-${kind}` } });
      assert.equal(result.isError ?? false, false, JSON.stringify(result));
      assertReport(result, `sync-${kind}`);
      assert.equal(result.task, undefined, "a call without params.task gets no task");
    });

    test("callToolStream runs a taskSupport tool as a task that completes with its result", { timeout }, async () => {
      assert.ok(c.client.getServerCapabilities()?.tasks?.requests?.tools?.call, `capabilities.tasks.requests.tools.call at initialize: ${JSON.stringify(c.client.getServerCapabilities())}`);
      const { tools } = await c.client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), toolNames);
      const quick = tools.find((t) => t.name === "quick_report");
      assert.equal(quick.execution?.taskSupport, "optional", `tools/list entry: ${JSON.stringify(quick)}`);
      const messages = await stream(c.client, "quick_report", { label: `legacy-${kind}` });
      assert.equal(messages[0]?.type, "taskCreated", show(messages));
      const task = messages[0].task;
      assert.equal(task.status, "working");
      assert.ok("ttl" in task, "the task carries ttl");
      const last = messages.at(-1);
      assert.equal(last.type, "result", show(messages));
      assert.equal(last.result.isError ?? false, false);
      assertReport(last.result, `legacy-${kind}`);
      assert.equal(last.result._meta?.[related]?.taskId, task.taskId, "tasks/result carries related-task _meta");
    });

    test("callToolStream of a failing job ends with the isError result", { timeout }, async () => {
      await c.client.listTools();
      const messages = await stream(c.client, "broken_export", {});
      assert.equal(messages[0]?.type, "taskCreated", show(messages));
      const last = messages.at(-1);
      // A job that ran and failed is completed + isError (DESIGN.md), so
      // the client fetches the payload with tasks/result and sees it.
      assert.equal(last.type, "result", show(messages));
      assert.equal(last.result.isError, true);
      assert.equal(text(last.result), "Export failed: disk quota exceeded.");
    });

    test("tasks/cancel cancels the task and the job downstream", { timeout }, async () => {
      await c.client.listTools();
      const before = await jobs(c.jobAPI);
      const it = c.client.experimental.tasks.callToolStream({ name: "long_migration", arguments: {} });
      const first = await it.next();
      assert.equal(first.value?.type, "taskCreated", JSON.stringify(first.value));
      const taskId = first.value.task.taskId;
      const rest = (async () => {
        const messages = [];
        for await (const m of it) messages.push(m);
        return messages;
      })();
      const job = await newJob(c.jobAPI, before);
      await jobReaches(c.jobAPI, job.id, "running");
      const cancelled = await c.client.experimental.tasks.cancelTask(taskId);
      assert.equal(cancelled.taskId, taskId);
      assert.equal(cancelled.status, "cancelled", "the task is cancelled before tasks/cancel answers");
      const messages = await rest;
      const last = messages.at(-1);
      assert.equal(last?.type, "error", show(messages));
      assert.match(String(last.error?.message), /cancelled/);
      const got = await c.client.experimental.tasks.getTask(taskId);
      assert.equal(got.status, "cancelled");
      await jobReaches(c.jobAPI, job.id, "cancelled");
    });

    test("a confirm: tool is answered through elicitation", { timeout }, async () => {
      await c.client.listTools();
      const asked = c.elicitations.length;
      const messages = await stream(c.client, "confirm_delete", { filename: `legacy-${kind}.txt` });
      assert.equal(messages[0]?.type, "taskCreated", show(messages));
      const taskId = messages[0].task.taskId;
      const last = messages.at(-1);
      assert.equal(last.type, "result", show(messages));
      assert.equal(text(last.result), `Deleted legacy-${kind}.txt.`);
      const questions = c.elicitations.slice(asked);
      assert.equal(questions.length, 1, `one elicitation, got ${JSON.stringify(questions)}`);
      const { params } = questions[0];
      assert.equal(params.message, `Delete legacy-${kind}.txt?`);
      assert.equal(params.requestedSchema.properties.confirm.type, "boolean");
      assert.equal(params._meta?.[related]?.taskId, taskId, "the elicitation names its task");
    });

    if (kind === "stdio") {
      test("tasks/list shows the caller's task", { timeout }, async () => {
        await c.client.listTools();
        const taskId = await startTask(c.client);
        try {
          const { tasks } = await c.client.experimental.tasks.listTasks();
          assert.ok(tasks.some((t) => t.taskId === taskId), `tasks/list: ${JSON.stringify(tasks)}`);
        } finally {
          await c.client.experimental.tasks.cancelTask(taskId).catch(() => {});
        }
      });
    }
  });
}

describe("v1 client (2025-11-25) over http with authentication", () => {
  let server;
  const callers = {};
  before(async () => {
    server = await startHTTP({ auth: true });
    for (const who of ["alice", "bob"]) callers[who] = await connectLegacy("http", server, { token: await server.token(who) });
  });
  after(async () => {
    for (const c of Object.values(callers)) await c.close();
    await server?.stop();
  });

  test("tasks/list shows only the caller's tasks", { timeout }, async () => {
    const mine = {};
    for (const [who, c] of Object.entries(callers)) {
      await c.client.listTools();
      mine[who] = await startTask(c.client);
    }
    try {
      for (const [who, c] of Object.entries(callers)) {
        const { tasks } = await c.client.experimental.tasks.listTasks();
        const ids = tasks.map((t) => t.taskId);
        for (const [owner, id] of Object.entries(mine)) {
          assert.equal(ids.includes(id), owner === who, `${who}'s tasks/list ${owner === who ? "lacks" : "shows"} ${owner}'s task: ${JSON.stringify(ids)}`);
        }
      }
    } finally {
      for (const [who, c] of Object.entries(callers)) await c.client.experimental.tasks.cancelTask(mine[who]).catch(() => {});
    }
  });
});

/** Starts a long_migration task and returns its ID once created. */
async function startTask(client) {
  const it = client.experimental.tasks.callToolStream({ name: "long_migration", arguments: {} });
  const first = await it.next();
  await it.return();
  assert.equal(first.value?.type, "taskCreated", JSON.stringify(first.value));
  return first.value.task.taskId;
}
