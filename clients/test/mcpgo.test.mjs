// mcp-go (github.com/mark3labs/mcp-go, pinned in mcpgo/go.mod): the Go
// program in mcpgo/, which clients/run.sh builds (MCPGO_BIN), runs each of
// its scenarios against the real binary over Streamable HTTP. mcp-go speaks
// 2025-11-25 tasks only, and its client calls tools plainly: long jobs
// reach it through the handle mode. See mcpgo/main.go for what each
// scenario checks.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { startHTTP } from "../lib/jobbridge.mjs";

const timeout = 30000;

function mcpgo(server, scenario) {
  const bin = process.env.MCPGO_BIN;
  if (!bin) throw new Error("MCPGO_BIN is not set: run the tests through clients/run.sh");
  return new Promise((resolve) => {
    execFile(bin, ["-url", server.url.href, "-jobs", server.jobAPI, scenario], { timeout: timeout - 2000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? 1) : 0, out: stdout + stderr });
    });
  });
}

describe("mcp-go (no tasks) over http", () => {
  let server;
  before(async () => {
    server = await startHTTP();
  });
  after(async () => {
    await server?.stop();
  });

  for (const [scenario, what] of [
    ["long-job", "a job longer than the sync budget: the handle, then its result with summary and link"],
    ["failure", "a job that fails: its reason"],
    ["confirmation", "no job without a confirmation"],
  ]) {
    test(what, { timeout }, async () => {
      const { code, out } = await mcpgo(server, scenario);
      assert.equal(code, 0, out);
      assert.match(out, /^PASS$/m, out);
    });
  }
});
