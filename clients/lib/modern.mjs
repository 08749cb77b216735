// The 2.x client (@modelcontextprotocol/client, protocol 2026-07-28) with the
// official Tasks requester (@modelcontextprotocol/ext-tasks).
//
// What the packages do, read from their dist/: the 2.x Client negotiates the
// era (pinned here to 2026-07-28: server/discover, no initialize) and lists
// tools, but its wire codecs have no Tasks extension (no tasks/update, and a
// tools/call answered with resultType "task" is not a CallToolResult).
// ext-tasks' createTaskSessionFromClient drives the extension: it frames
// tools/call and tasks/get|update|cancel with the per-request _meta that
// declares io.modelcontextprotocol/tasks, polls tasks/get at pollIntervalMs,
// answers inputRequests through onInputRequest with tasks/update, and sends
// tasks/cancel. For that V2 traffic it requires the host to pass a
// `rawDispatch` (a request coordinator that bypasses the SDK's codecs) and
// the framing; rawDispatch below sends each request on the client's own
// transport (Streamable HTTP or stdio, so the transport's own headers such as
// Mcp-Method and Mcp-Name are the SDK's) and routes the answer back by id.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";
import { fakeFromStderr, stdioCommand } from "./jobbridge.mjs";

const version = "2026-07-28";
const clientInfo = { name: "jobbridge-clients-modern", version: "0.0.0" };
const capabilities = { elicitation: { form: {} }, extensions: { "io.modelcontextprotocol/tasks": {} } };

/** Sends raw JSON-RPC requests on a connected transport, keyed by own ids. */
function rawDispatcher(transport) {
  const pending = new Map();
  let next = 0;
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const waiter = message.method === undefined && pending.get(message.id);
    if (waiter) {
      pending.delete(message.id);
      waiter(message);
      return;
    }
    deliver?.call(transport, message, extra);
  };
  return (request, options = {}) =>
    new Promise((resolve, reject) => {
      const id = `tasks-${++next}`;
      const abort = () => {
        pending.delete(id);
        reject(options.signal.reason ?? new Error("aborted"));
      };
      if (options.signal?.aborted) return abort();
      options.signal?.addEventListener("abort", abort, { once: true });
      pending.set(id, (m) => {
        options.signal?.removeEventListener("abort", abort);
        resolve(m.error ? { kind: "error", error: m.error } : { kind: "result", result: m.result });
      });
      transport.send({ ...request, jsonrpc: "2.0", id }).catch((e) => {
        pending.delete(id);
        reject(e);
      });
    });
}

/**
 * Connects a 2.x client over "http" (to server.url) or "stdio" (spawning
 * the binary). It answers every input request the way a user would accept
 * a confirmation, and records what it was asked.
 */
export async function connectModern(kind, server) {
  const inputs = [];
  const client = new Client(clientInfo, { capabilities, versionNegotiation: { mode: { pin: version } } });
  let transport;
  let jobAPI;
  if (kind === "http") {
    transport = new StreamableHTTPClientTransport(server.url);
    jobAPI = server.jobAPI;
  } else {
    transport = new StdioClientTransport({ ...stdioCommand(), stderr: "pipe" });
    jobAPI = fakeFromStderr(transport.stderr);
  }
  await client.connect(transport);
  const session = createTaskSessionFromClient(client, {
    endpointId: `jobbridge-${kind}`,
    rawDispatch: rawDispatcher(transport),
    v2RequestFraming: { protocolVersion: version, clientInfo, clientCapabilities: capabilities },
    onInputRequest: async (request, context) => {
      inputs.push({ request, context });
      return { action: "accept", content: { confirm: true } };
    },
  });
  return {
    client,
    session,
    inputs,
    jobAPI: await jobAPI,
    async close() {
      await session.close().catch(() => {});
      await client.close();
    },
  };
}
