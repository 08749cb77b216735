// Push for the v1 SDK client (protocol 2025-11-25): a session that created
// a task hears notifications/tasks/status when it changes, without polling
// (on the standalone GET stream over HTTP, on stdout over stdio). The v1
// client parses each with its TaskStatusNotificationSchema; a notification
// that did not parse, or a carrier left on the wire (a progress
// notification with a token the client never sent), would reach
// client.onerror instead.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { CreateTaskResultSchema, TaskStatusNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
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
  });
}
