// Push for the v1 SDK client (protocol 2025-11-25): a session that created
// a task hears notifications/tasks/status when it changes, without polling
// (on the standalone GET stream over HTTP, on stdout over stdio). The v1
// client parses each with its TaskStatusNotificationSchema; a notification
// that did not parse, or a carrier left on the wire (a progress
// notification with a token the client never sent), would reach
// client.onerror instead. And a session that polls only tasks/get (as MCP
// Inspector does with "Run as task") is asked its task's question on the
// same channel, once.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { CallToolResultSchema, CreateTaskResultSchema, TaskStatusNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { startHTTP } from "../lib/jobbridge.mjs";
import { connectLegacy } from "../lib/legacy.mjs";

const timeout = 30000;

for (const kind of ["http", "stdio"]) {
  describe(`v1 client (2025-11-25) over ${kind}: push`, () => {
    let server;
    let c;
    const statuses = [];
    const errors = [];
    let heard = () => {};
    before(async () => {
      if (kind === "http") server = await startHTTP();
      c = await connectLegacy(kind, server);
      c.client.onerror = (e) => errors.push(String(e?.message ?? e));
      c.client.setNotificationHandler(TaskStatusNotificationSchema, (n) => {
        statuses.push(n.params);
        heard();
      });
    });
    after(async () => {
      await c?.close();
      await server?.stop();
    });

    /** Resolves with the first status notification of taskId that has status. */
    function notified(taskId, status) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no notifications/tasks/status ${status} for ${taskId}; heard ${JSON.stringify(statuses)}`)), 20000);
        const check = () => {
          const n = statuses.find((s) => s.taskId === taskId && s.status === status);
          if (n) {
            clearTimeout(timer);
            resolve(n);
          }
        };
        heard = check;
        check();
      });
    }

    test("a task's end is pushed to the session that created it, without polling", { timeout }, async () => {
      await c.client.listTools();
      // params.task on a plain request: the client itself polls nothing.
      const created = await c.client.request(
        { method: "tools/call", params: { name: "quick_report", arguments: { label: `push-${kind}` }, task: {} } },
        CreateTaskResultSchema,
      );
      const taskId = created.task.taskId;
      const n = await notified(taskId, "completed");
      assert.ok("ttl" in n, `the notification carries ttl: ${JSON.stringify(n)}`);
      assert.equal(n._meta?.["io.modelcontextprotocol/related-task"], undefined, "no related-task _meta on a status notification");
      assert.deepEqual(errors, [], "the client reported no error (no unparsed notification, no stray progress)");
    });

    test("a cancel is pushed too", { timeout }, async () => {
      const created = await c.client.request(
        { method: "tools/call", params: { name: "long_migration", arguments: {}, task: {} } },
        CreateTaskResultSchema,
      );
      const taskId = created.task.taskId;
      await c.client.experimental.tasks.cancelTask(taskId);
      const n = await notified(taskId, "cancelled");
      assert.equal(n.taskId, taskId);
      assert.deepEqual(errors, []);
    });

    test("a session that polls only tasks/get is asked the confirmation, once", { timeout }, async () => {
      const asked = c.elicitations.length;
      const created = await c.client.request(
        { method: "tools/call", params: { name: "confirm_delete", arguments: { filename: `relay-${kind}.txt` }, task: {} } },
        CreateTaskResultSchema,
      );
      const taskId = created.task.taskId;
      let task = created.task;
      const deadline = Date.now() + 20000;
      while (!["completed", "failed", "cancelled"].includes(task.status)) {
        assert.ok(Date.now() < deadline, `the task never ended: ${JSON.stringify(task)}`);
        await new Promise((r) => setTimeout(r, task.pollInterval ?? 200));
        task = await c.client.experimental.tasks.getTask(taskId);
      }
      assert.equal(task.status, "completed", JSON.stringify(task));
      const mine = c.elicitations.slice(asked);
      assert.equal(mine.length, 1, `asked ${JSON.stringify(mine)}`);
      assert.equal(mine[0].params._meta?.["io.modelcontextprotocol/related-task"]?.taskId, taskId);
      assert.match(mine[0].params.message, new RegExp(`relay-${kind}\\.txt`));
      // The result is there; a tasks/result now asks nothing again.
      const result = await c.client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
      assert.equal(result.content?.[0]?.text, `Deleted relay-${kind}.txt.`);
      assert.equal(c.elicitations.length - asked, 1, "tasks/result asked the question again");
    });
  });
}
