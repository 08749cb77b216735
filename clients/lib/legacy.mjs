// The v1 TypeScript SDK client (@modelcontextprotocol/sdk, protocol
// 2025-11-25), the client behind most desktop MCP hosts. It speaks the
// experimental tasks of 2025-11-25: capabilities.tasks at initialize,
// execution.taskSupport in tools/list, params.task on tools/call,
// tasks/get|result|list|cancel, and elicitation/create relayed while the
// client waits on tasks/result.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { fakeFromStderr, stdioCommand } from "./jobbridge.mjs";

/**
 * Connects a v1 client over "http" (to server.url, with an optional bearer
 * token) or "stdio" (spawning the binary). It declares form elicitation and
 * accepts every elicitation with {confirm: true}, recording the requests.
 */
export async function connectLegacy(kind, server, { token } = {}) {
  const elicitations = [];
  const client = new Client({ name: "jobbridge-clients-legacy", version: "0.0.0" }, { capabilities: { elicitation: { form: {} } } });
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    elicitations.push(request);
    return { action: "accept", content: { confirm: true } };
  });
  let transport;
  let jobAPI;
  if (kind === "http") {
    const headers = token ? { Authorization: `Bearer ${token}` } : {};
    transport = new StreamableHTTPClientTransport(server.url, { requestInit: { headers } });
    jobAPI = server.jobAPI;
  } else {
    transport = new StdioClientTransport({ ...stdioCommand(), stderr: "pipe" });
    jobAPI = fakeFromStderr(transport.stderr);
  }
  await client.connect(transport);
  return {
    client,
    elicitations,
    jobAPI: await jobAPI,
    close: () => client.close(),
  };
}

/** Runs callToolStream to its end and returns every message it yielded. */
export async function stream(client, name, args) {
  const messages = [];
  for await (const m of client.experimental.tasks.callToolStream({ name, arguments: args })) messages.push(m);
  return messages;
}

/** A short description of a stream's messages, for assertion messages. */
export function describe(messages) {
  return JSON.stringify(
    messages.map((m) =>
      m.type === "error" ? { type: m.type, error: String(m.error?.message ?? m.error) } : m.type === "result" ? { type: m.type, result: m.result } : { type: m.type, status: m.task?.status },
    ),
  );
}
