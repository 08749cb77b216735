// The 2.x client (protocol 2026-07-28, Tasks extension through ext-tasks)
// against the real binary, over Streamable HTTP and over stdio.
import { describe, test, before, after } from "node:test";

// Bounds each test (and each hook): a flow that hangs fails in seconds.
const timeout = 30000;
import assert from "node:assert/strict";
import { startHTTP, jobs, newJob, jobReaches, eventually, text, toolNames, assertReport } from "../lib/jobbridge.mjs";
import { connectModern } from "../lib/modern.mjs";

for (const kind of ["http", "stdio"]) {
  describe(`2.x client (2026-07-28) over ${kind}`, () => {
    let server;
    let c;
    before(async () => {
      if (kind === "http") server = await startHTTP();
      c = await connectModern(kind, server);
    });
    after(async () => {
      await c?.close();
      await server?.stop();
    });

    test("lists the catalog's tools", { timeout }, async () => {
      assert.equal(c.client.getProtocolEra(), "modern");
      assert.deepEqual(c.client.getServerCapabilities()?.extensions, { "io.modelcontextprotocol/tasks": {} });
      const { tools } = await c.client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), toolNames);
      for (const t of tools) assert.equal(t.inputSchema.type, "object", `${t.name} inputSchema.type`);
      assert.ok(tools.every((t) => t.execution === undefined), "2026-07-28 tools carry no execution.taskSupport");
    });

    test("a task-augmented call completes with the job's result", { timeout }, async () => {
      const ex = await c.session.callTool("quick_report", { label: `modern-${kind}` });
      assert.equal(ex.kind, "task", "quick_report runs as a task");
      const seen = [];
      const { outcome } = await ex.settle({ onEvent: (e) => e.type === "task" && seen.push(e.task.status) });
      assert.equal(outcome.status, "completed", JSON.stringify(outcome));
      assert.equal(outcome.result.isError, false);
      assertReport(outcome.result, `modern-${kind}`);
      assert.equal(seen[0], "working", `statuses seen: ${seen}`);
    });

    test("a job that fails completes the task with isError", { timeout }, async () => {
      const ex = await c.session.callTool("broken_export", {});
      assert.equal(ex.kind, "task");
      const { outcome } = await ex.settle();
      assert.equal(outcome.status, "completed", `a job failure is completed + isError, not failed: ${JSON.stringify(outcome)}`);
      assert.equal(outcome.result.isError, true);
      assert.equal(text(outcome.result), "Export failed: disk quota exceeded.");
      assert.equal(outcome.task?.statusMessage, "export failed: disk quota exceeded");
    });

    test("tasks/cancel ends the task cancelled and cancels the job downstream", { timeout }, async () => {
      const before = await jobs(c.jobAPI);
      const ex = await c.session.callTool("long_migration", {});
      assert.equal(ex.kind, "task");
      const taskId = ex.handle.taskId;
      const job = await newJob(c.jobAPI, before);
      await jobReaches(c.jobAPI, job.id, "running");
      await ex.cancel();
      // The client counts the task cancelled once the cancel is
      // acknowledged; the server's own view must follow.
      const view = await eventually("tasks/get to say cancelled", async () => {
        const v = await c.session.task(taskId).snapshot();
        return v.status === "cancelled" ? v : undefined;
      });
      assert.equal(view.taskId, taskId);
      const stopped = await jobReaches(c.jobAPI, job.id, "cancelled");
      assert.equal(stopped.status, "cancelled");
      await ex.close().catch(() => {});
    });

    test("a confirm: tool is answered through its input request", { timeout }, async () => {
      const asked = c.inputs.length;
      const before = await jobs(c.jobAPI);
      const ex = await c.session.callTool("confirm_delete", { filename: `modern-${kind}.txt` });
      assert.equal(ex.kind, "task");
      const { outcome } = await ex.settle();
      assert.equal(outcome.status, "completed", JSON.stringify(outcome));
      assert.equal(text(outcome.result), `Deleted modern-${kind}.txt.`);
      const questions = c.inputs.slice(asked);
      assert.equal(questions.length, 1, `one input request, got ${JSON.stringify(questions)}`);
      const { request, context } = questions[0];
      assert.equal(request.kind, "elicitation");
      assert.equal(request.params.message, `Delete modern-${kind}.txt?`);
      assert.equal(request.params.requestedSchema.properties.confirm.type, "boolean");
      assert.deepEqual(request.params.requestedSchema.required, ["confirm"]);
      assert.equal(context.taskId, ex.handle.taskId);
      assert.equal(context.delivery, "task-update", "answered with tasks/update");
      const after = [...(await jobs(c.jobAPI)).values()].filter((j) => !before.has(j.id));
      assert.equal(after.length, 1, "the job is submitted once, after the confirmation");
    });
  });
}
