// The 2.x client's subscriptions/listen for tasks (Tasks §4.8) against the
// real binary, over Streamable HTTP (a long-lived SSE response to the POST)
// and over stdio: Client.listen({taskIds}) opens the stream and the ext-tasks
// session consumes the notifications/tasks it carries (see lib/modern.mjs).
//
// The session's own tasks/get requests are withheld on this connection: they
// are never sent, so a task can only advance, and a result only arrive,
// through the stream.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { startHTTP, stdioCommand, jobs, newJob, jobReaches, text, assertReport } from "../lib/jobbridge.mjs";
import { connectModern, listenTasks, requests } from "../lib/modern.mjs";

// Bounds each test (and each hook): a flow that hangs fails in seconds.
const timeout = 30000;
const terminal = new Set(["completed", "failed", "cancelled"]);

/**
 * Asserts that pushed is one task's states in the order they happened:
 * each a complete DetailedTask of taskId, updated no earlier than the one
 * before, and only the last one terminal.
 */
function assertInOrder(pushed, taskId) {
  assert.ok(pushed.length > 0, "no notifications/tasks delivered");
  const statuses = pushed.map((t) => t.status);
  for (const [i, t] of pushed.entries()) {
    assert.equal(t.taskId, taskId);
    assert.ok(t.createdAt && t.lastUpdatedAt, `notification ${i} is a complete DetailedTask: ${JSON.stringify(t)}`);
    assert.equal(t.resultType, undefined, "a notification carries no resultType");
    if (i > 0) assert.ok(t.lastUpdatedAt >= pushed[i - 1].lastUpdatedAt, `out of order: ${JSON.stringify(pushed)}`);
    if (i < pushed.length - 1) assert.ok(!terminal.has(t.status), `a state after a terminal one: ${statuses}`);
  }
  return statuses;
}

/** Asserts that c sent no tasks/get since the marks (and, over HTTP, posted none). */
function assertNoPolls(c, { sent, posted }) {
  assert.deepEqual(requests(c.wire.sent.slice(sent), "tasks/get"), [], "tasks/get sent on the transport");
  assert.ok(!c.wire.posted.slice(posted).includes("tasks/get"), "tasks/get POSTed");
}

function marks(c) {
  return { sent: c.wire.sent.length, posted: c.wire.posted.length };
}

for (const kind of ["http", "stdio"]) {
  describe(`2.x client listens for notifications/tasks over ${kind}`, () => {
    let server;
    let c;
    before(async () => {
      if (kind === "http") server = await startHTTP();
      c = await connectModern(kind, server, { withholdTaskPolls: true });
    });
    after(async () => {
      await c?.close();
      await server?.stop();
    });

    test("the task session waits for the result on the stream, without tasks/get", { timeout }, async (t) => {
      const mark = marks(c);
      const label = `pushed-${kind}`;
      const ex = await c.session.callTool("quick_report", { label });
      assert.equal(ex.kind, "task");
      const taskId = ex.handle.taskId;
      const sub = await listenTasks(c, [taskId]);
      assert.deepEqual(sub.agreed, [taskId], "the acknowledgement lists the task");
      if (kind === "http") assert.ok(c.wire.posted.slice(mark.posted).includes("subscriptions/listen"), "listen is POSTed");

      const seen = [];
      const { outcome } = await ex.settle({ onEvent: (e) => e.type === "task" && seen.push(e.task.status) });
      assert.equal(outcome.status, "completed", JSON.stringify(outcome));
      assertReport(outcome.result, label);
      assert.equal(seen.at(-1), "completed", `the session's statuses: ${seen}`);
      assert.ok(
        seen.slice(0, -1).every((s) => s === "working"),
        `the session's statuses: ${seen}`,
      );

      // What the stream delivered: the current state first, then each
      // change, the final one with the result.
      const pushed = sub.delivered();
      const statuses = assertInOrder(pushed, taskId);
      assert.equal(statuses[0], "working", `statuses pushed: ${statuses}`);
      const last = pushed.at(-1);
      assert.equal(last.status, "completed", `statuses pushed: ${statuses}`);
      assertReport(last.result, label);
      assert.equal(last.result.isError, false);
      // Every notification on the wire for the task names its subscription.
      const onWire = c.wire.received.filter((m) => m.method === "notifications/tasks" && m.params.taskId === taskId);
      assert.equal(onWire.length, pushed.length, "the Client delivered every notifications/tasks it received");
      for (const m of onWire) assert.equal(m.params._meta?.["io.modelcontextprotocol/subscriptionId"], sub.id);

      assertNoPolls(c, mark);
      t.diagnostic(`${pushed.length} notifications; the session would have sent ${c.withheld} tasks/get so far on this connection`);
      await sub.close();
      assert.equal(await sub.closed, "local");
    });

    test("a task already finished when the stream opens arrives at once, in its final state", { timeout }, async () => {
      const mark = marks(c);
      const ex = await c.session.callTool("broken_export", {});
      assert.equal(ex.kind, "task");
      const taskId = ex.handle.taskId;
      // A first stream sees the task to its end.
      const first = await listenTasks(c, [taskId]);
      const { outcome } = await ex.settle();
      assert.equal(outcome.status, "completed", JSON.stringify(outcome));
      await first.close();

      // A stream opened afterwards: the final state is its first message,
      // unknown IDs are left out of the acknowledgement.
      const from = c.wire.received.length;
      const again = await listenTasks(c, ["no-such-task", taskId]);
      assert.deepEqual(again.agreed, [taskId], "the acknowledgement lists only the known task");
      const final = await again.until("the final state on the new stream", () => true);
      const after = c.wire.received.slice(from).filter((m) => m.method !== undefined && m.id === undefined);
      assert.equal(after[0].method, "notifications/subscriptions/acknowledged", "the acknowledgement comes first");
      assert.equal(after[1].method, "notifications/tasks", "the task's state follows the acknowledgement");
      assert.equal(final.taskId, taskId);
      assert.equal(final.status, "completed");
      assert.equal(final.statusMessage, "export failed: disk quota exceeded");
      assert.equal(final.result.isError, true);
      assert.equal(text(final.result), "Export failed: disk quota exceeded.");
      assert.deepEqual(again.delivered(), [final], "one notification so far: the final state");

      assertNoPolls(c, mark);
      await again.close();
      assert.equal(await again.closed, "local");
    });

    test("a cancel is observed through the stream", { timeout }, async () => {
      const mark = marks(c);
      const known = await jobs(c.jobAPI);
      const ex = await c.session.callTool("long_migration", {});
      assert.equal(ex.kind, "task");
      const taskId = ex.handle.taskId;
      const sub = await listenTasks(c, [taskId]);
      const job = await newJob(c.jobAPI, known);
      await jobReaches(c.jobAPI, job.id, "running");
      await sub.until("the running job pushed", (t) => t.status === "working" && /running/.test(t.statusMessage ?? ""));

      await ex.cancel();
      const cancelled = await sub.until("the cancel pushed", (t) => t.status === "cancelled");
      assert.equal(cancelled.taskId, taskId);
      const statuses = assertInOrder(sub.delivered(), taskId);
      assert.equal(statuses.at(-1), "cancelled", `statuses pushed: ${statuses}`);
      const { status } = await ex.result();
      assert.equal(status, "cancelled");
      const stopped = await jobReaches(c.jobAPI, job.id, "cancelled");
      assert.equal(stopped.status, "cancelled");

      assertNoPolls(c, mark);
      await sub.close();
      assert.equal(await sub.closed, "local");
    });

    test("a listen for tasks without the tasks extension is refused with -32021", { timeout }, async () => {
      // A client that does not declare io.modelcontextprotocol/tasks.
      const plain = new Client({ name: "jobbridge-clients-plain", version: "0.0.0" }, { capabilities: {}, versionNegotiation: { mode: { pin: "2026-07-28" } } });
      const transport = kind === "http" ? new StreamableHTTPClientTransport(server.url) : new StdioClientTransport({ ...stdioCommand(), stderr: "ignore" });
      await plain.connect(transport);
      try {
        await assert.rejects(plain.listen({ taskIds: ["any-task"] }), (e) => {
          assert.equal(e.code, -32021, e.message);
          assert.deepEqual(e.data?.requiredCapabilities?.extensions, { "io.modelcontextprotocol/tasks": {} });
          return true;
        });
      } finally {
        await plain.close();
      }
    });
  });
}

describe("2.x client listening over http while the server shuts down", () => {
  test("the stream ends with the listen's result (a graceful close)", { timeout }, async () => {
    const server = await startHTTP();
    const c = await connectModern("http", server, { withholdTaskPolls: true });
    try {
      const ex = await c.session.callTool("long_migration", {});
      const sub = await listenTasks(c, [ex.handle.taskId]);
      await sub.until("the task's current state", () => true);
      const stopped = server.stop();
      assert.equal(await sub.closed, "graceful");
      const result = c.wire.received.find((m) => m.id === sub.id);
      assert.equal(result?.result?.resultType, "complete", JSON.stringify(result));
      assert.equal(result.result._meta?.["io.modelcontextprotocol/subscriptionId"], sub.id);
      await stopped;
    } finally {
      await c.close().catch(() => {});
      await server.stop();
    }
  });
});
