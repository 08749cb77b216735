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
//
// Status notifications (Tasks §4.8), read from the same dist/: ext-tasks
// opens no stream itself. The core Client's listen(filter) sends
// subscriptions/listen with params.notifications set to the filter as given
// (so {taskIds} reaches the server verbatim), resolves on the server's
// notifications/subscriptions/acknowledged and returns {honoredFilter,
// close, closed}; its codec's filter schema knows only the core fields, so
// honoredFilter drops the acknowledged taskIds (the raw ack is read from the
// wire here). notifications/tasks is no core method: the Client hands it to
// fallbackNotificationHandler, which the ext-tasks adapter owns (chaining a
// handler set before it; a handler registered with setNotificationHandler
// for the method would take them from the session), and the session passes
// each one to its tasks' executions. An execution's wait for its result
// races each poll interval against those notifications: a notification
// received within the interval takes the place of that tasks/get, a
// terminal one (with its result) ends the wait, but an interval with no
// notification still sends tasks/get.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";
import { eventually, fakeFromStderr, stdioCommand } from "./jobbridge.mjs";

const version = "2026-07-28";
const clientInfo = { name: "jobbridge-clients-modern", version: "0.0.0" };
const capabilities = { elicitation: { form: {} }, extensions: { "io.modelcontextprotocol/tasks": {} } };

/**
 * Sends raw JSON-RPC requests on a connected transport, keyed by own ids.
 * A request withhold(request) picks is not sent: it waits until its signal
 * aborts, as a tasks/get the server never answered would.
 */
function rawDispatcher(transport, withhold) {
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
      if (withhold(request)) return;
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
 * Records a connected transport's traffic: every message it sends and every
 * message it receives, before the Client sees it.
 */
function tapTransport(transport, wire) {
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    wire.sent.push(message);
    return send(message, options);
  };
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    wire.received.push(message);
    deliver?.call(transport, message, extra);
  };
}

/** A fetch that records the JSON-RPC method of every POST it makes. */
function recordingFetch(posted) {
  return (input, init) => {
    if (init?.method === "POST" && typeof init.body === "string") {
      try {
        posted.push(JSON.parse(init.body).method);
      } catch {
        posted.push(undefined);
      }
    }
    return fetch(input, init);
  };
}

/**
 * Connects a 2.x client over "http" (to server.url) or "stdio" (spawning
 * the binary). It answers every input request the way a user would accept
 * a confirmation, and records what it was asked.
 *
 * It also records the traffic: wire.sent and wire.received are the
 * transport's messages, wire.posted (HTTP) the method of each POST its
 * fetch made, and notified the notifications the Client delivered to its
 * handlers (observed through the fallback handler the ext-tasks adapter
 * chains). With withholdTaskPolls the session's tasks/get requests are never
 * sent (withheld counts them): a task then advances only through
 * notifications/tasks.
 */
export async function connectModern(kind, server, { withholdTaskPolls = false } = {}) {
  const inputs = [];
  const wire = { sent: [], received: [], posted: [] };
  const notified = [];
  let withheld = 0;
  const client = new Client(clientInfo, { capabilities, versionNegotiation: { mode: { pin: version } } });
  let transport;
  let jobAPI;
  if (kind === "http") {
    transport = new StreamableHTTPClientTransport(server.url, { fetch: recordingFetch(wire.posted) });
    jobAPI = server.jobAPI;
  } else {
    transport = new StdioClientTransport({ ...stdioCommand(), stderr: "pipe" });
    jobAPI = fakeFromStderr(transport.stderr);
  }
  await client.connect(transport);
  const withhold = (request) => {
    if (!withholdTaskPolls || request.method !== "tasks/get") return false;
    withheld++;
    return true;
  };
  const dispatch = rawDispatcher(transport, withhold);
  tapTransport(transport, wire);
  client.fallbackNotificationHandler = async (notification) => {
    notified.push(notification);
  };
  const session = createTaskSessionFromClient(client, {
    endpointId: `jobbridge-${kind}`,
    rawDispatch: dispatch,
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
    wire,
    notified,
    get withheld() {
      return withheld;
    },
    jobAPI: await jobAPI,
    async close() {
      await session.close().catch(() => {});
      await client.close();
    },
  };
}

/** The requests of a list of sent (or received) messages with this method. */
export function requests(messages, method) {
  return messages.filter((m) => m.method === method && m.id !== undefined);
}

/**
 * Opens subscriptions/listen for taskIds through the Client's listen() and
 * returns the subscription with what the server acknowledged (read from the
 * wire: honoredFilter has no taskIds) and accessors for what it delivered.
 */
export async function listenTasks(c, taskIds) {
  const from = c.wire.received.length;
  const fromNotified = c.notified.length;
  const sub = await c.client.listen({ taskIds });
  const ack = c.wire.received.slice(from).findLast((m) => m.method === "notifications/subscriptions/acknowledged");
  const id = ack?.params?._meta?.["io.modelcontextprotocol/subscriptionId"];
  const mine = (m) => m.method === "notifications/tasks" && m.params?._meta?.["io.modelcontextprotocol/subscriptionId"] === id;
  return {
    ...sub,
    /** The listen request's id, as the acknowledgement names it. */
    id,
    /** The task IDs the server agreed to. */
    agreed: ack?.params?.notifications?.taskIds,
    /** The DetailedTasks of notifications/tasks the Client delivered for this subscription, oldest first. */
    delivered: () =>
      c.notified
        .slice(fromNotified)
        .filter(mine)
        .map((m) => m.params),
    /** Waits until a delivered notification matches and returns it. */
    until: (what, match) => eventually(what, () => c.notified.slice(fromNotified).filter(mine).map((m) => m.params).find(match)),
  };
}
