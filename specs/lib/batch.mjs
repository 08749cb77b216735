// Validates recorded AWS Batch exchanges against the service's own model.
//
// Shapes (types and required members) come from the model the pinned AWS SDK
// for JavaScript v2 ships, aws-sdk/apis/batch-2016-08-10.min.json. That
// minified model drops enums and the per-operation error lists, so those two
// come from the pinned AWS SDK for JavaScript v3 Batch client, generated from
// the same service model: the enum of each member from its TypeScript
// declarations (models_0.d.ts, enums.d.ts), the errors each operation
// declares from its command's `@throws` list, and each error's HTTP status
// from the client's error schemas (`httpError`).
//
// Batch speaks restJson1: every operation is an HTTP request to the model's
// http.requestUri (POST unless the model says otherwise) with a JSON body;
// errors name their type in the x-amzn-ErrorType header or the body's
// __type member.

import { createRequire } from "node:module";
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";

const require = createRequire(import.meta.url);
let cached;

// loadModel reads the pinned model files once.
export function loadModel() {
  if (cached) return cached;
  const model = require("aws-sdk/apis/batch-2016-08-10.min.json");
  const v2version = require("aws-sdk/package.json").version;
  const v3root = dirname(require.resolve("@aws-sdk/client-batch/package.json"));
  const v3version = require("@aws-sdk/client-batch/package.json").version;

  // Enums: `export declare const Name: { readonly A: "a"; ... };`
  const enumsText = readFileSync(join(v3root, "dist-types/models/enums.d.ts"), "utf8");
  const enums = new Map();
  for (const m of enumsText.matchAll(/export declare const (\w+): \{([^}]*)\}/g)) {
    enums.set(m[1], [...m[2].matchAll(/readonly \w+: "([^"]*)"/g)].map((x) => x[1]));
  }
  // Interfaces: member name -> declared TypeScript type.
  const modelsText = readFileSync(join(v3root, "dist-types/models/models_0.d.ts"), "utf8");
  const interfaces = new Map();
  for (const m of modelsText.matchAll(/export interface (\w+) \{([\s\S]*?)\n\}/g)) {
    const members = new Map();
    for (const mm of m[2].matchAll(/^\s{4}(\w+)\??: (.+?)(?: \| undefined)?;$/gm)) members.set(mm[1], mm[2]);
    interfaces.set(m[1], members);
  }
  // Errors and their HTTP status: `var XException$ = [-3, n0, _XE, { [_e]: _c, [_hE]: 400 }`
  const cjs = readFileSync(join(v3root, "dist-cjs/index.js"), "utf8");
  const consts = new Map([...cjs.matchAll(/^const (_\w+) = "([^"]*)";$/gm)].map((m) => [m[1], m[2]]));
  const errorStatus = new Map();
  for (const m of cjs.matchAll(/var (\w+)\$ = \[-3, n0, (_\w+),\s*\{[^}]*\[_hE\]: (\d+)/g)) {
    errorStatus.set(consts.get(m[2]) || m[1], Number(m[3]));
  }
  // Declared errors per operation, from the command's doc comment.
  const opErrors = new Map();
  const cmdDir = join(v3root, "dist-types/commands");
  for (const f of readdirSync(cmdDir)) {
    const m = /^(\w+)Command\.d\.ts$/.exec(f);
    if (!m) continue;
    const text = readFileSync(join(cmdDir, f), "utf8");
    opErrors.set(
      m[1],
      [...text.matchAll(/@throws \{@link (\w+)\}/g)].map((x) => x[1]).filter((n) => n !== "BatchServiceException"),
    );
  }
  const byUri = new Map();
  for (const [name, op] of Object.entries(model.operations)) {
    byUri.set(((op.http && op.http.method) || "POST") + " " + op.http.requestUri, name);
  }
  cached = { model, v2version, v3version, enums, interfaces, errorStatus, opErrors, byUri };
  return cached;
}

// findOperation names the operation of an exchange: its `operation` field,
// else the model's request URI for the method and path.
export function findOperation(x) {
  const m = loadModel();
  if (x.operation) return m.model.operations[x.operation] ? x.operation : undefined;
  return m.byUri.get(String(x.method).toUpperCase() + " " + x.path);
}

// v3 type of a TypeScript declaration, one level down.
function v3inner(ts) {
  if (!ts) return undefined;
  let m;
  if ((m = /^(\w+)\[\]$/.exec(ts))) return { list: m[1] };
  if ((m = /^Record<string, (\w+)(\[\])?>$/.exec(ts))) return { map: m[2] ? m[1] + "[]" : m[1] };
  if (/^\w+$/.test(ts)) return { named: ts };
  return undefined;
}

// validateShape checks value against a model shape; tsType is the v3
// client's declared type for the same position (for enums), if known.
export function validateShape(m, shapeRef, value, path, tsType, out) {
  const shapeName = shapeRef && shapeRef.shape;
  let shape = shapeRef;
  while (shape && shape.shape) shape = m.model.shapes[shape.shape];
  const type = (shape && shape.type) || "string";
  const err = (message) => out.push({ where: path, message, schemaPath: "model " + type });
  if (value === null) {
    err(`null is not a ${type}`);
    return;
  }
  const named = tsType && /^\w+$/.test(tsType) ? tsType : undefined;
  switch (type) {
    case "structure": {
      if (typeof value !== "object" || Array.isArray(value)) return err(`expected a structure (JSON object), got ${jsonType(value)}`);
      const members = shape.members || {};
      const tsMembers = named ? m.interfaces.get(named) : undefined;
      for (const r of shape.required || []) {
        if (r in value) continue;
        if ((shapeName === "JobDetail" || named === "JobDetail") && r === "startedAt" && neverStarted(value)) {
          // Known defect of the model: JobDetail marks startedAt required,
          // but the service has no start time to give for a job whose
          // container never started (SUBMITTED, PENDING, RUNNABLE,
          // STARTING, or cancelled before it ran), and leaves it out, as
          // its API reference describes startedAt: "the time the job was
          // started". The only exception on the Batch side.
          out.push({ exception: "batch-JobDetail.startedAt-before-start" });
          continue;
        }
        out.push({ where: path + "." + r, message: `required member ${r} is missing`, schemaPath: "model structure.required" });
      }
      for (const [k, v] of Object.entries(value)) {
        if (!(k in members)) {
          if (k === "__type" && path === "response.body") continue;
          // A member the v3 client (generated from a newer revision of the
          // same model) declares, e.g. JobSummary.shareIdentifier: checked
          // against its declared scalar type.
          const ts = tsMembers && tsMembers.get(k);
          if (ts) {
            const want = { string: "string", number: "number", boolean: "boolean" }[ts];
            if (want && typeof v !== want) out.push({ where: path + "." + k, message: `expected a ${want}, got ${jsonType(v)}`, schemaPath: `client-batch ${named}.${k}` });
            else if (!want && m.enums.has(ts) && !m.enums.get(ts).includes(v)) out.push({ where: path + "." + k, message: `${JSON.stringify(v)} is not one of ${ts}`, schemaPath: `client-batch enum ${ts}` });
            continue;
          }
          out.push({ where: path + "." + k, message: `member ${k} is not in the model`, schemaPath: "model structure.members" });
          continue;
        }
        validateShape(m, members[k], v, path + "." + k, tsMembers ? tsMembers.get(k) : undefined, out);
      }
      return;
    }
    case "list": {
      if (!Array.isArray(value)) return err(`expected a list (JSON array), got ${jsonType(value)}`);
      const inner = v3inner(tsType);
      value.forEach((v, i) => validateShape(m, shape.member || {}, v, `${path}[${i}]`, inner && inner.list, out));
      return;
    }
    case "map": {
      if (typeof value !== "object" || Array.isArray(value)) return err(`expected a map (JSON object), got ${jsonType(value)}`);
      const inner = v3inner(tsType);
      for (const [k, v] of Object.entries(value)) {
        validateShape(m, shape.key || {}, k, `${path}{key ${k}}`, undefined, out);
        validateShape(m, shape.value || {}, v, `${path}.${k}`, inner && inner.map, out);
      }
      return;
    }
    case "string": {
      if (typeof value !== "string") return err(`expected a string, got ${jsonType(value)}`);
      const values = named ? m.enums.get(named) : undefined;
      if (values && !values.includes(value)) out.push({ where: path, message: `${JSON.stringify(value)} is not one of ${named} [${values.join(", ")}]`, schemaPath: "model enum " + named });
      return;
    }
    case "integer":
    case "long":
      if (!Number.isInteger(value)) return err(`expected an ${type}, got ${jsonType(value)}`);
      if (type === "integer" && (value < -2147483648 || value > 2147483647)) return err(`${value} is out of the integer range`);
      return;
    case "double":
    case "float":
      if (typeof value !== "number") return err(`expected a ${type}, got ${jsonType(value)}`);
      return;
    case "boolean":
      if (typeof value !== "boolean") return err(`expected a boolean, got ${jsonType(value)}`);
      return;
    case "timestamp":
      // restJson1 sends timestamps as epoch seconds in bodies.
      if (typeof value !== "number") return err(`expected a timestamp (epoch seconds), got ${jsonType(value)}`);
      return;
    case "blob":
      if (typeof value !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(value)) return err(`expected a base64 blob`);
      return;
    default:
      return err(`unknown model type ${type}`);
  }
}

function jsonType(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v;
}

function headerValue(headers, name) {
  if (!headers) return undefined;
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === name.toLowerCase()) return Array.isArray(v) ? v[0] : v;
  }
  return undefined;
}

function parseBody(text, where, out) {
  if (text === undefined || text === "") return { ok: true, value: undefined };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    out.push({ where, message: "body is not JSON: " + e.message, schemaPath: "restJson1" });
    return { ok: false };
  }
}

// neverStarted reports whether a JobDetail describes a job whose container
// never started: no attempt records a start.
function neverStarted(job) {
  if (["SUBMITTED", "PENDING", "RUNNABLE", "STARTING"].includes(job.status)) return true;
  const attempts = Array.isArray(job.attempts) ? job.attempts : [];
  return !attempts.some((a) => a && a.startedAt);
}

// checkBatchExchange returns the violations of one exchange and the known
// exceptions it hit.
export function checkBatchExchange(x) {
  if (x.operation === EVENT_DELIVERY) return { ...checkBatchEventDelivery(x), kind: "event" };
  const { violations } = checkBatchExchangeAll(x);
  return {
    violations: violations.filter((v) => !v.exception),
    exceptions: violations.filter((v) => v.exception).map((v) => v.exception),
  };
}

// AWS_COMMON_ERRORS are the errors any AWS API may answer although no
// operation of its model declares them, with their HTTP statuses: AWS's
// "Common Errors" (the API references' CommonErrors page), the JSON
// protocols' credential errors, restJson1's unknown operation, and
// Batch's documented throttling error (429 TooManyRequestsException, "AWS
// Batch requests error", AWS re:Post). Anything else an operation does not
// declare is a violation, such as ServiceUnavailableException, which no
// Batch operation declares.
export const AWS_COMMON_ERRORS = {
  AccessDeniedException: [400, 403],
  ExpiredTokenException: [400, 403],
  IncompleteSignature: [400],
  InternalFailure: [500, 502, 504],
  InvalidAction: [400],
  InvalidClientTokenId: [403],
  InvalidSignatureException: [400, 403],
  NotAuthorized: [400],
  OptInRequired: [403],
  RequestExpired: [400],
  ServiceUnavailable: [503],
  ThrottlingException: [400],
  TooManyRequestsException: [429],
  UnknownOperationException: [404],
  UnrecognizedClientException: [400, 403],
  ValidationError: [400],
};

// errorType is the error type an answer names (x-amzn-ErrorType, or the
// body's __type), without namespace or suffix; undefined when none.
function errorType(x) {
  let type = headerValue(x.response_headers, "x-amzn-ErrorType");
  if (!type) {
    try {
      const body = JSON.parse(x.response_body || "");
      if (body && typeof body.__type === "string") type = body.__type;
    } catch {
      // not JSON: no type
    }
  }
  return type ? type.split(":")[0].split("#").pop() : undefined;
}

// checkErrorType reports an error type the operation does not declare and
// that is no AWS common error, and a status the model (or the common
// errors' table) does not give it.
function checkErrorType(m, name, type, status, violations) {
  const declared = m.opErrors.get(name) || [];
  if (declared.includes(type)) {
    if (m.errorStatus.get(type) !== status) {
      violations.push({ where: "response.status", message: `${type} is HTTP ${m.errorStatus.get(type)} in the model, got ${status}`, schemaPath: `model shapes.${type}.error.httpStatusCode` });
    }
  } else if (Object.hasOwn(AWS_COMMON_ERRORS, type)) {
    if (!AWS_COMMON_ERRORS[type].includes(status)) {
      violations.push({ where: "response.status", message: `${type} is HTTP ${AWS_COMMON_ERRORS[type].join(" or ")} among AWS's common errors, got ${status}`, schemaPath: `AWS common errors ${type}` });
    }
  } else {
    violations.push({ where: "response.error", message: `${name} does not declare error ${type} (declared: ${declared.join(", ") || "none"}), and it is no AWS common error`, schemaPath: `model operations.${name}.errors` });
  }
}

function checkBatchExchangeAll(x) {
  const m = loadModel();
  const violations = [];
  const name = findOperation(x);
  if (!name) {
    violations.push({ where: "request", message: `no Batch operation ${x.operation || ""} for ${x.method} ${x.path}`, schemaPath: "model operations" });
    return { violations, exceptions: [] };
  }
  const op = m.model.operations[name];
  const method = (op.http && op.http.method) || "POST";
  if (String(x.method).toUpperCase() !== method || x.path.split("?")[0] !== op.http.requestUri) {
    if (!op.http.requestUri.includes("{"))
      violations.push({ where: "request", message: `${name} is ${method} ${op.http.requestUri}, got ${x.method} ${x.path}`, schemaPath: `model operations.${name}.http` });
  }
  const req = parseBody(x.request_body, "request.body", violations);
  if (req.ok) {
    validateShape(m, op.input || { type: "structure", members: {} }, req.value === undefined ? {} : req.value, "request.body", name + "Request", violations);
  }
  if (x.injected) {
    // A fault a test injected chooses its status, and its body may be made
    // up; the error type it names is the fake's choice, and must be one the
    // operation declares or any AWS API may answer.
    const type = errorType(x);
    if (type) checkErrorType(m, name, type, Number(x.status), violations);
    return { violations, exceptions: [] };
  }

  if (!headerValue(x.response_headers, "x-amzn-RequestId")) {
    violations.push({ where: "response.headers", message: "x-amzn-RequestId header is missing (every restJson1 answer carries one)", schemaPath: "restJson1" });
  }
  const status = Number(x.status);
  const resp = parseBody(x.response_body, "response.body", violations);
  if (status >= 200 && status < 300) {
    if (status !== 200) violations.push({ where: "response.status", message: `${name} answers 200 on success, got ${status}`, schemaPath: `model operations.${name}.http` });
    if (resp.ok) validateShape(m, op.output || { type: "structure", members: {} }, resp.value === undefined ? {} : resp.value, "response.body", name + "Response", violations);
    return { violations, exceptions: [] };
  }
  // An error answer: its type must be one the operation declares, with the
  // HTTP status the model gives that error.
  const type = errorType(x);
  if (!type) {
    violations.push({ where: "response", message: `error answer ${status} names no error type (x-amzn-ErrorType header or __type)`, schemaPath: "restJson1" });
    return { violations, exceptions: [] };
  }
  checkErrorType(m, name, type, status, violations);
  if (resp.ok && resp.value !== undefined) {
    const body = resp.value;
    if (typeof body !== "object" || Array.isArray(body) || body === null) {
      violations.push({ where: "response.body", message: "error body is not a JSON object", schemaPath: "restJson1" });
    } else {
      for (const [k, v] of Object.entries(body)) {
        if (k === "__type" || k.toLowerCase() === "message") {
          if (typeof v !== "string") violations.push({ where: "response.body." + k, message: `expected a string, got ${jsonType(v)}`, schemaPath: `model shapes.${type}` });
        } else {
          violations.push({ where: "response.body." + k, message: `member ${k} is not in error ${type}`, schemaPath: `model shapes.${type}` });
        }
      }
    }
  }
  return { violations, exceptions: [] };
}

// Event deliveries. The Batch fake also plays EventBridge: it posts each
// job state change to an API destination, and records the request with
// operation "EventDelivery" (the answer is the receiver's, the bridge's, and
// is not checked). A delivery is checked against what AWS documents:
//   - the request an API destination sends: any method but CONNECT and
//     TRACE (POST here), the headers it adds to every request (User-Agent
//     Amazon/EventBridge/ApiDestinations, Content-Type application/json;
//     charset=utf-8, Range bytes=0-1048575, Accept-Encoding gzip,deflate,
//     Connection close, Host, Content-Length) and the connection's
//     credential (its API key header; the recorder redacts the value);
//   - the body: the whole event envelope (no input transformer), at most
//     256 KiB (EventBridge's event size limit), with exactly the envelope
//     members version "0", id, detail-type, source, account (12 digits),
//     time (ISO 8601 in whole seconds, UTC), region, resources and detail
//     (and replay-name, which a replayed archive adds);
//   - for source aws.batch and detail-type "Batch Job State Change": the
//     detail against the service model's JobDetail (the member of
//     DescribeJobs' jobs), with the same known exception as a DescribeJobs
//     answer, resources naming the job's ARN, and no SUBMITTED status (Batch
//     sends no event for the submission).
// Timestamps: EventBridge serialises the detail's timestamps as epoch
// milliseconds, which is how the model types them (createdAt, startedAt,
// stoppedAt are longs in JobDetail, as in a DescribeJobs answer; the
// sample event's createdAt is 1641944200058); only the envelope's time is
// text. So the integer rule of validateShape checks them, and the restJson1
// timestamp rule (epoch seconds) never applies inside a detail.
export const EVENT_DELIVERY = "EventDelivery";

const EVENTBRIDGE_HEADERS = {
  "user-agent": "Amazon/EventBridge/ApiDestinations",
  "content-type": "application/json; charset=utf-8",
  range: "bytes=0-1048575",
  "accept-encoding": "gzip,deflate",
  connection: "close",
};
const ENVELOPE_MEMBERS = ["version", "id", "detail-type", "source", "account", "time", "region", "resources", "detail"];
const MAX_EVENT_BYTES = 256 * 1024;

// jobDetailShape is the model's JobDetail: the member shape of DescribeJobs'
// output member jobs (the minified model inlines it).
function jobDetailShape(m) {
  const deref = (s) => {
    while (s && s.shape) s = m.model.shapes[s.shape];
    return s;
  };
  const out = deref(m.model.operations.DescribeJobs.output);
  return deref(deref(out.members.jobs).member);
}

// checkBatchEventDelivery returns the violations of one recorded event
// delivery and the known exceptions it hit.
export function checkBatchEventDelivery(x) {
  const m = loadModel();
  const all = [];
  const v = (where, message, schemaPath) => all.push({ where, message, schemaPath });
  const method = String(x.method || "").toUpperCase();
  if (!/^[A-Z]+$/.test(method) || method === "CONNECT" || method === "TRACE") {
    v("request.method", `an API destination sends any method but CONNECT and TRACE, got ${x.method}`, "EventBridge API destination");
  }
  const headers = x.request_headers || {};
  for (const [name, want] of Object.entries(EVENTBRIDGE_HEADERS)) {
    const got = headerValue(headers, name);
    if (got !== want) v(`request.headers.${name}`, `an API destination sends ${name}: ${want}, got ${JSON.stringify(got === undefined ? null : got)}`, "EventBridge API destination headers");
  }
  if (!headerValue(headers, "host")) v("request.headers.host", "the Host header is missing", "EventBridge API destination headers");
  const body = x.request_body || "";
  const length = headerValue(headers, "content-length");
  if (!x.truncated && length !== String(Buffer.byteLength(body, "utf8"))) {
    v("request.headers.content-length", `Content-Length ${JSON.stringify(length === undefined ? null : length)} is not the body's ${Buffer.byteLength(body, "utf8")} bytes`, "EventBridge API destination headers");
  }
  const own = new Set([...Object.keys(EVENTBRIDGE_HEADERS), "host", "content-length"]);
  if (!Object.keys(headers).some((k) => !own.has(k.toLowerCase()))) {
    v("request.headers", "no credential of the connection (its API key header, or Authorization)", "EventBridge connection");
  }
  if (Buffer.byteLength(body, "utf8") > MAX_EVENT_BYTES || x.truncated) {
    v("request.body", `an event is at most ${MAX_EVENT_BYTES} bytes`, "EventBridge event size");
    return split(all);
  }
  const parsed = parseBody(body, "request.body", all);
  if (!parsed.ok) return split(all);
  const env = parsed.value;
  if (typeof env !== "object" || env === null || Array.isArray(env)) {
    v("request.body", `expected the event envelope (a JSON object), got ${jsonType(env)}`, "EventBridge event envelope");
    return split(all);
  }
  for (const k of ENVELOPE_MEMBERS) {
    if (!(k in env)) v(`request.body.${k}`, `required member ${k} of the event envelope is missing`, "EventBridge event envelope");
  }
  for (const [k, val] of Object.entries(env)) {
    if (!ENVELOPE_MEMBERS.includes(k) && k !== "replay-name") v(`request.body.${k}`, `member ${k} is not in the event envelope`, "EventBridge event envelope");
    else if (k === "resources") {
      if (!Array.isArray(val) || val.some((r) => typeof r !== "string")) v("request.body.resources", `expected a list of ARNs (strings), got ${jsonType(val)}`, "EventBridge event envelope");
    } else if (k === "detail") {
      if (typeof val !== "object" || val === null || Array.isArray(val)) v("request.body.detail", `expected a JSON object, got ${jsonType(val)}`, "EventBridge event envelope");
    } else if (typeof val !== "string") v(`request.body.${k}`, `expected a string, got ${jsonType(val)}`, "EventBridge event envelope");
  }
  const str = (k) => (typeof env[k] === "string" ? env[k] : undefined);
  if (str("version") !== undefined && env.version !== "0") v("request.body.version", `version is "0", got ${JSON.stringify(env.version)}`, "EventBridge event envelope");
  if (str("id") !== undefined && !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(env.id)) v("request.body.id", `id ${JSON.stringify(env.id)} is not UUID-shaped`, "EventBridge event envelope");
  if (str("account") !== undefined && !/^\d{12}$/.test(env.account)) v("request.body.account", `account ${JSON.stringify(env.account)} is not a 12-digit account ID`, "EventBridge event envelope");
  if (str("time") !== undefined && (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/.test(env.time) || Number.isNaN(Date.parse(env.time)))) {
    v("request.body.time", `time ${JSON.stringify(env.time)} is not an ISO 8601 UTC time in whole seconds (YYYY-MM-DDThh:mm:ssZ)`, "EventBridge event envelope");
  }
  if (str("region") !== undefined && !/^[a-z]{2}(-[a-z]+)+-\d+$/.test(env.region)) v("request.body.region", `region ${JSON.stringify(env.region)} is not a region name`, "EventBridge event envelope");

  if (env.source === "aws.batch" && env["detail-type"] === "Batch Job State Change" && env.detail && typeof env.detail === "object" && !Array.isArray(env.detail)) {
    validateShape(m, jobDetailShape(m), env.detail, "request.body.detail", "JobDetail", all);
    const arn = env.detail.jobArn;
    if (Array.isArray(env.resources) && !(env.resources.length === 1 && env.resources[0] === arn)) {
      v("request.body.resources", `resources is the job's ARN [${JSON.stringify(arn)}], got ${JSON.stringify(env.resources)}`, "Batch job state change event");
    }
    if (env.detail.status === "SUBMITTED") v("request.body.detail.status", "Batch sends no event for the submission (SUBMITTED)", "Batch job state change event");
  }
  return split(all);
}

function split(all) {
  return {
    violations: all.filter((v) => !v.exception),
    exceptions: all.filter((v) => v.exception).map((v) => v.exception),
  };
}
