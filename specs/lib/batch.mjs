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
  const { violations } = checkBatchExchangeAll(x);
  return {
    violations: violations.filter((v) => !v.exception),
    exceptions: violations.filter((v) => v.exception).map((v) => v.exception),
  };
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
  if (x.injected) return { violations, exceptions: [] };

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
  let type = headerValue(x.response_headers, "x-amzn-ErrorType");
  if (!type && resp.ok && resp.value && typeof resp.value.__type === "string") type = resp.value.__type;
  if (!type) {
    violations.push({ where: "response", message: `error answer ${status} names no error type (x-amzn-ErrorType header or __type)`, schemaPath: "restJson1" });
    return { violations, exceptions: [] };
  }
  type = type.split(":")[0].split("#").pop();
  const declared = m.opErrors.get(name) || [];
  if (!declared.includes(type)) {
    violations.push({ where: "response.error", message: `${name} does not declare error ${type} (declared: ${declared.join(", ") || "none"})`, schemaPath: `model operations.${name}.errors` });
  } else if (m.errorStatus.get(type) !== status) {
    violations.push({ where: "response.status", message: `${type} is HTTP ${m.errorStatus.get(type)} in the model, got ${status}`, schemaPath: `model shapes.${type}.error.httpStatusCode` });
  }
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
