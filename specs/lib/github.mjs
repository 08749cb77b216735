// Validates recorded GitHub REST exchanges against GitHub's own OpenAPI
// description of api.github.com, as published in the pinned @octokit/openapi
// package (generated/api.github.com.json, OpenAPI 3.0.3).
//
// For each exchange it checks the request (a documented path template and
// method, the path and query parameters, the request body against the
// operation's requestBody schema) and the answer (a status the operation
// documents, the body against that status's schema for its content type).
// Schemas are validated with Ajv, referring into the description itself, so
// every $ref is resolved the way the description means it.

import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import Ajv from "ajv";
import addFormats from "ajv-formats";

const require = createRequire(import.meta.url);
const DOC_ID = "gh";

// Known defects of GitHub's description. These are the only two exceptions
// the checker tolerates; every other mismatch is a violation.
export const GITHUB_EXCEPTIONS = {
  // workflow_id is declared `oneOf: [{type: integer}, {type: string}]`.
  // A numeric id in the path ("1234") is valid under both branches once the
  // path segment is read as its declared types, and `oneOf` demands exactly
  // one, so a numeric workflow id can never validate.
  "workflow_id-oneOf":
    "workflow_id is declared oneOf [integer, string]; a numeric id matches both branches, so oneOf always fails for it",
  // The `created` query parameter of the workflow-run listings is declared
  // `format: date-time`, but GitHub documents (and its own description links
  // to) search syntax for it: `>=2026-01-02T03:04:05Z`, `a..b`, `<date`.
  "created-search-syntax":
    "created is declared format date-time although it takes search syntax (>=DATE, DATE..DATE)",
};

let cached;

// loadDescription reads the pinned description once and prepares the Ajv
// instances that validate against it.
export function loadDescription() {
  if (cached) return cached;
  const file = require.resolve("@octokit/openapi/generated/api.github.com.json");
  const doc = JSON.parse(readFileSync(file, "utf8"));
  allowNullInNullableEnums(doc);
  const version = require("@octokit/openapi/package.json").version;
  const mk = (coerceTypes) => {
    // strict:false because OpenAPI schemas carry keywords JSON Schema does
    // not know (example, discriminator, x-github, ...); validateSchema:false
    // because the document as a whole is not a JSON Schema. `nullable` is
    // an OpenAPI 3.0 keyword Ajv implements natively.
    const ajv = new Ajv({
      strict: false,
      allErrors: true,
      validateSchema: false,
      coerceTypes,
      logger: false,
    });
    addFormats(ajv);
    ajv.addSchema(doc, DOC_ID);
    return ajv;
  };
  const templates = Object.keys(doc.paths).map((t) => {
    const segs = t.split("/").slice(1);
    return {
      template: t,
      literals: segs.filter((s) => !s.startsWith("{")).length,
      re: new RegExp(
        "^" +
          segs
            .map((s) => "/" + (s.startsWith("{") ? "([^/]+)" : escapeRe(s)))
            .join("") +
          "$",
      ),
      names: segs.filter((s) => s.startsWith("{")).map((s) => s.slice(1, -1)),
    };
  });
  // Most literal segments first: /repos/{o}/{r}/actions/runs/{id} must not
  // be taken for a template with a parameter where the path has a literal.
  templates.sort((a, b) => b.literals - a.literals);
  cached = {
    doc,
    version,
    bodies: mk(false),
    params: mk(true),
    templates,
    compiled: new Map(),
  };
  return cached;
}

// allowNullInNullableEnums reads `nullable: true` the way the description
// means it: null is a valid value, also where the schema has an enum
// (`conclusion: {type: string, nullable: true, enum: [success, ...]}` is null
// while a job runs). Ajv would otherwise reject null against the enum. This
// is the same rewrite the OpenAPI 3.1 form of a 3.0 description makes.
function allowNullInNullableEnums(node) {
  if (Array.isArray(node)) {
    for (const n of node) allowNullInNullableEnums(n);
    return;
  }
  if (!node || typeof node !== "object") return;
  if (node.nullable === true && Array.isArray(node.enum) && !node.enum.includes(null)) node.enum = [...node.enum, null];
  for (const v of Object.values(node)) allowNullInNullableEnums(v);
}

// HTTP rules that hold for every operation although the description does
// not repeat them per operation. They are counted and printed like the known
// exceptions, so that the report shows how often they applied.
export const GITHUB_HTTP_RULES = {
  "http-304-conditional":
    "304 Not Modified with no body, answering a request that carried If-None-Match or If-Modified-Since (RFC 9110 §15.4.5; GitHub documents conditional requests for every endpoint)",
  "http-error-shared-answer":
    "an error status the operation does not list, validated against the description's shared answer for that status (components/responses: bad_request, requires_authentication, forbidden, not_found, validation_failed, internal_error, service_unavailable)",
};

// RATE_LIMIT_HEADERS are the headers GitHub sends on every REST answer
// ("Checking the status of your rate limit", docs.github.com REST API rate
// limits): the window's limit, what is left and used, when it resets (Unix
// seconds) and which resource it counts.
export const RATE_LIMIT_HEADERS = ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-used", "x-ratelimit-reset", "x-ratelimit-resource"];

// checkRateLimitHeaders reports an answer (dropped connections have none)
// that lacks one of RATE_LIMIT_HEADERS, or carries one that is not what
// GitHub sends (a non-negative integer; the resource a word).
function checkRateLimitHeaders(x, v) {
  if (!x.status) return;
  for (const h of RATE_LIMIT_HEADERS) {
    const val = headerValue(x.response_headers, h);
    if (val === undefined) {
      v("response.headers." + h, `the ${x.status} answer has no ${h} header (GitHub sends the rate-limit headers on every REST answer)`, "rest rate limits: x-ratelimit-*");
    } else if (h === "x-ratelimit-resource" ? !/^[a-z_]+$/.test(val) : !/^[0-9]+$/.test(val)) {
      v("response.headers." + h, `${h} is ${JSON.stringify(val)}, not ${h === "x-ratelimit-resource" ? "a resource name" : "a non-negative integer"}`, "rest rate limits: x-ratelimit-*");
    }
  }
}

// Shared error answers of the description, by status.
const SHARED_ERRORS = {
  400: "bad_request",
  401: "requires_authentication",
  403: "forbidden",
  404: "not_found",
  409: "conflict",
  410: "gone",
  422: "validation_failed",
  500: "internal_error",
  503: "service_unavailable",
};

function escapeRe(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

// pointer builds a JSON pointer into the description.
function pointer(...parts) {
  return (
    "#/" + parts.map((p) => String(p).replace(/~/g, "~0").replace(/\//g, "~1")).join("/")
  );
}

function resolve(doc, node) {
  let seen = 0;
  while (node && node.$ref && seen++ < 20) {
    const parts = node.$ref.replace(/^#\//, "").split("/").map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
    node = parts.reduce((n, p) => (n ? n[p] : undefined), doc);
  }
  return node;
}

function validator(d, ajv, ptr) {
  const key = (ajv === d.params ? "p" : "b") + ptr;
  let v = d.compiled.get(key);
  if (!v) {
    v = ajv.compile({ $ref: DOC_ID + ptr });
    d.compiled.set(key, v);
  }
  return v;
}

function headerValue(headers, name) {
  if (!headers) return undefined;
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === name.toLowerCase()) return Array.isArray(v) ? v[0] : v;
  }
  return undefined;
}

function mediaType(ct) {
  return (ct || "").split(";")[0].trim().toLowerCase();
}

function ajvErrors(errors, where) {
  return (errors || []).map((e) => ({
    where: where + (e.instancePath || ""),
    schemaPath: e.schemaPath,
    message: e.message + (e.params && Object.keys(e.params).length ? " " + JSON.stringify(e.params) : ""),
  }));
}

// findOperation maps a recorded path to its documented template. Paths may
// carry GitHub Enterprise Server's /api/v3 prefix.
export function findOperation(path) {
  const d = loadDescription();
  const p = path.replace(/^\/api\/v3(?=\/)/, "");
  for (const t of d.templates) {
    const m = t.re.exec(p);
    if (m) {
      const values = {};
      t.names.forEach((n, i) => (values[n] = decodeURIComponent(m[i + 1])));
      return { template: t.template, values };
    }
  }
  return undefined;
}

// checkParam validates one parameter value (always a string on the wire)
// against its schema, reading it as the schema's declared types.
function checkParam(d, ptr, param, raw, where, out, exceptions) {
  if (param.name === "created" && param.in === "query" && isSearchDateSyntax(raw)) {
    exceptions.push("created-search-syntax");
    return;
  }
  const ok = validateWrapped(d, ptr, raw);
  if (ok === true) return;
  const schema = resolve(d.doc, param.schema) || {};
  if (
    param.name === "workflow_id" &&
    Array.isArray(schema.oneOf) &&
    /^[0-9]+$/.test(raw) &&
    ok.every((e) => e.message.startsWith("must match exactly one schema"))
  ) {
    exceptions.push("workflow_id-oneOf");
    return;
  }
  for (const e of ok) out.push({ ...e, where: where + e.where.replace(/^\/value/, "") });
}

// validateWrapped validates {value: raw} against {properties: {value: the
// parameter's schema}} with type coercion, the way an OpenAPI validator
// reads path and query strings. Returns true or the list of errors.
function validateWrapped(d, ptr, raw) {
  const key = "w" + ptr;
  let v = d.compiled.get(key);
  if (!v) {
    v = d.params.compile({ type: "object", properties: { value: { $ref: DOC_ID + ptr } } });
    d.compiled.set(key, v);
  }
  if (v({ value: raw })) return true;
  return ajvErrors(v.errors, "");
}

// isSearchDateSyntax accepts GitHub's date search syntax: an optional
// comparison operator before a date or date-time, or a range DATE..DATE
// (either side may be *).
export function isSearchDateSyntax(s) {
  const date = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/;
  const m = /^(>=|<=|>|<)(.+)$/.exec(s);
  if (m) return date.test(m[2]);
  if (s.includes("..")) {
    const [a, b, ...rest] = s.split("..");
    return rest.length === 0 && (a === "*" || date.test(a)) && (b === "*" || date.test(b)) && !(a === "*" && b === "*");
  }
  return false;
}

// checkGithubExchange returns the violations of one exchange and the known
// exceptions it hit.
export function checkGithubExchange(x) {
  if (x.operation === WEBHOOK_OPERATION) return checkGithubWebhook(x);
  const d = loadDescription();
  const violations = [];
  const exceptions = [];
  const v = (where, message, schemaPath = "") => violations.push({ where, message, schemaPath });

  const op = findOperation(x.path || "");
  if (!op) {
    v("request.path", `no documented path template matches ${x.path}`);
    return { violations, exceptions };
  }
  const method = String(x.method || "").toLowerCase();
  const item = d.doc.paths[op.template];
  const operation = item[method];
  if (!operation) {
    v("request.method", `${x.method} is not documented for ${op.template}`, pointer("paths", op.template));
    return { violations, exceptions };
  }
  const opPtr = pointer("paths", op.template, method);

  // Parameters: path-item level ones, overridden by operation level ones.
  const params = new Map();
  for (const [list, base] of [
    [item.parameters || [], pointer("paths", op.template, "parameters")],
    [operation.parameters || [], opPtr + "/parameters"],
  ]) {
    list.forEach((p, i) => {
      const r = resolve(d.doc, p);
      const at = p.$ref ? p.$ref : base + "/" + i;
      params.set(r.in + ":" + r.name, { param: r, ptr: at + "/schema" });
    });
  }
  const query = new URLSearchParams(x.query || "");
  for (const key of new Set(query.keys())) {
    if (!params.has("query:" + key)) v("request.query." + key, `query parameter ${key} is not documented for ${x.method} ${op.template}`, opPtr + "/parameters");
  }
  for (const { param, ptr } of params.values()) {
    let raw;
    if (param.in === "path") raw = op.values[param.name];
    else if (param.in === "query") raw = query.get(param.name) ?? undefined;
    else continue; // header and cookie parameters are not checked
    if (raw === undefined) {
      if (param.required) v("request." + param.in + "." + param.name, `required ${param.in} parameter ${param.name} is missing`, ptr);
      continue;
    }
    checkParam(d, ptr, param, raw, "request." + param.in + "." + param.name, violations, exceptions);
  }

  // Request body.
  const reqBody = resolve(d.doc, operation.requestBody);
  const body = x.request_body || "";
  if (reqBody) {
    if (body === "") {
      if (reqBody.required) v("request.body", "request body is required", opPtr + "/requestBody");
    } else {
      const mt = mediaType(headerValue(x.request_headers, "Content-Type")) || "application/json";
      const content = reqBody.content || {};
      const key = content[mt] ? mt : undefined;
      if (!key) {
        v("request.headers.Content-Type", `request content type ${mt} is not documented (documented: ${Object.keys(content).join(", ")})`, opPtr + "/requestBody/content");
      } else {
        const bPtr = operation.requestBody.$ref ? operation.requestBody.$ref : opPtr + "/requestBody";
        checkJsonBody(d, body, bPtr + "/content/" + key.replace(/~/g, "~0").replace(/\//g, "~1") + "/schema", "request.body", violations);
      }
    }
  } else if (body.trim() !== "") {
    v("request.body", `${x.method} ${op.template} documents no request body`, opPtr);
  }

  // Answer. GitHub sends its rate-limit headers on every REST answer, a
  // refusal, an error and a fault a test injected included: the fake adds
  // them itself, so they are checked on every answer.
  checkRateLimitHeaders(x, v);
  // Faults a test injected on purpose carry made-up answers otherwise.
  if (x.injected) return { violations, exceptions };
  const status = String(x.status);
  const responses = operation.responses || {};
  const statusKey = responses[status] ? status : responses[status[0] + "XX"] ? status[0] + "XX" : responses.default ? "default" : undefined;
  if (!statusKey && status === "304" && (headerValue(x.request_headers, "If-None-Match") || headerValue(x.request_headers, "If-Modified-Since"))) {
    exceptions.push("http-304-conditional");
    if ((x.response_body || "").trim() !== "") v("response.body", "a 304 answer has no body", "#/components/responses/not_modified");
    return { violations, exceptions };
  }
  if (!statusKey && SHARED_ERRORS[status] && d.doc.components.responses[SHARED_ERRORS[status]]) {
    exceptions.push("http-error-shared-answer");
    return checkAnswer(d, x, d.doc.components.responses[SHARED_ERRORS[status]], "#/components/responses/" + SHARED_ERRORS[status], status, violations, exceptions);
  }
  if (!statusKey) {
    v("response.status", `status ${status} is not documented for ${x.method} ${op.template} (documented: ${Object.keys(responses).join(", ")})`, opPtr + "/responses");
    return { violations, exceptions };
  }
  const rPtr = responses[statusKey].$ref ? responses[statusKey].$ref : opPtr + "/responses/" + statusKey;
  return checkAnswer(d, x, responses[statusKey], rPtr, status, violations, exceptions);
}

// checkAnswer validates the answer's body against a response object.
function checkAnswer(d, x, response, rPtr, status, violations, exceptions) {
  const v = (where, message, schemaPath = "") => violations.push({ where, message, schemaPath });
  const resp = resolve(d.doc, response);
  const rbody = x.response_body || "";
  const content = resp.content || {};
  if (Object.keys(content).length === 0) {
    if (rbody.trim() !== "") v("response.body", `status ${status} documents no body, got ${rbody.length} bytes`, rPtr);
    return { violations, exceptions };
  }
  const mt = mediaType(headerValue(x.response_headers, "Content-Type"));
  const key = content[mt] ? mt : undefined;
  if (!key) {
    v("response.headers.Content-Type", `response content type ${mt || "(none)"} is not documented for status ${status} (documented: ${Object.keys(content).join(", ")})`, rPtr + "/content");
    return { violations, exceptions };
  }
  if (!content[key].schema) return { violations, exceptions };
  if (x.truncated) return { violations, exceptions };
  if (rbody.trim() === "") {
    v("response.body", `status ${status} documents a ${key} body, got none`, rPtr);
    return { violations, exceptions };
  }
  if (/json/.test(key)) {
    checkJsonBody(d, rbody, rPtr + "/content/" + key.replace(/~/g, "~0").replace(/\//g, "~1") + "/schema", "response.body", violations);
  }
  return { violations, exceptions };
}

function checkJsonBody(d, text, ptr, where, out) {
  let data;
  try {
    data = JSON.parse(text);
  } catch (e) {
    out.push({ where, message: "body is not JSON: " + e.message, schemaPath: ptr });
    return;
  }
  const val = validator(d, d.bodies, ptr);
  if (!val(data)) {
    for (const e of ajvErrors(val.errors, where)) out.push({ ...e, schemaPath: ptr + " " + e.schemaPath });
  }
}

// A webhook delivery the fake sent (operation "webhook"): the request is
// GitHub's, the answer is the receiver's and is not checked. The payload is
// validated against the description's own webhook schema for the event and
// action, under x-webhooks (OpenAPI 3.0's extension for what 3.1 calls
// webhooks): X-GitHub-Event workflow_run with action in_progress is the
// operation workflow-run/in-progress, whose requestBody refers to
// components/schemas/webhook-workflow-run-in-progress; ping has no action.
export const WEBHOOK_OPERATION = "webhook";

// findWebhook returns the x-webhooks key and operation of event and action.
export function findWebhook(event, action) {
  const d = loadDescription();
  const hooks = d.doc["x-webhooks"] || {};
  const id = action ? `${event.replace(/_/g, "-")}/${action.replace(/_/g, "-")}` : event.replace(/_/g, "-");
  for (const [key, item] of Object.entries(hooks)) {
    if (item.post && item.post.operationId === id) return { key, operation: item.post };
  }
  return undefined;
}

// checkGithubWebhook returns the violations of one recorded delivery.
export function checkGithubWebhook(x) {
  const d = loadDescription();
  const violations = [];
  const exceptions = [];
  const v = (where, message, schemaPath = "") => violations.push({ where, message, schemaPath });
  const h = (name) => headerValue(x.request_headers, name);
  // Every return says kind "event", so that check.mjs counts the deliveries.
  const done = () => ({ violations, exceptions, kind: "event" });

  if (String(x.method || "").toUpperCase() !== "POST") v("request.method", `a webhook delivery is a POST, not ${x.method}`);
  const event = h("X-GitHub-Event");
  if (!event) {
    v("request.headers.X-GitHub-Event", "a webhook delivery names its event in X-GitHub-Event");
    return done();
  }
  if (!h("X-GitHub-Delivery")) v("request.headers.X-GitHub-Delivery", "a webhook delivery carries its GUID in X-GitHub-Delivery");
  if (!/^\d+$/.test(h("X-GitHub-Hook-ID") || "")) v("request.headers.X-GitHub-Hook-ID", "a webhook delivery carries the hook's numeric ID in X-GitHub-Hook-ID");
  if (!/^GitHub-Hookshot\/\S+$/.test(h("User-Agent") || "")) v("request.headers.User-Agent", `a webhook delivery's User-Agent is GitHub-Hookshot/<id>, got ${JSON.stringify(h("User-Agent") || "")}`);
  // Signed deliveries (a hook with a secret) carry the hex HMACs.
  const s256 = h("X-Hub-Signature-256");
  if (s256 !== undefined && !/^sha256=[0-9a-f]{64}$/.test(s256)) v("request.headers.X-Hub-Signature-256", "X-Hub-Signature-256 is sha256= and 64 hex digits");
  const s1 = h("X-Hub-Signature");
  if (s1 !== undefined && !/^sha1=[0-9a-f]{40}$/.test(s1)) v("request.headers.X-Hub-Signature", "X-Hub-Signature is sha1= and 40 hex digits");

  let body;
  try {
    body = JSON.parse(x.request_body || "");
  } catch (e) {
    v("request.body", "webhook payload is not JSON: " + e.message);
    return done();
  }
  const action = body && typeof body === "object" ? body.action : undefined;
  const hook = findWebhook(event, typeof action === "string" ? action : "");
  if (!hook) {
    v("request.body.action", `no webhook is documented for event ${event}${action !== undefined ? " action " + JSON.stringify(action) : ""}`, "#/x-webhooks");
    return done();
  }
  const mt = mediaType(h("Content-Type"));
  const content = (resolve(d.doc, hook.operation.requestBody) || {}).content || {};
  if (!content[mt]) {
    v("request.headers.Content-Type", `webhook content type ${mt || "(none)"} is not documented for ${hook.key} (documented: ${Object.keys(content).join(", ")})`, pointer("x-webhooks", hook.key, "post", "requestBody", "content"));
    return done();
  }
  if (x.truncated) return done();
  if (!/json/.test(mt)) return done();
  checkJsonBody(d, x.request_body, pointer("x-webhooks", hook.key, "post", "requestBody", "content", mt, "schema"), "request.body", violations);
  return done();
}
