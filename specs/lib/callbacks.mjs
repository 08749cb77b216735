// Validates the signed callbacks the job API fake sends (internal/fakes/
// jobapi, recorded as backend "jobapi-callbacks" with the signature scheme
// as the exchange's operation): the requests a job API with webhooks sends
// to the bridge's POST /events/{backend}. The answer is the receiver's and
// is not checked.
//
//   - standard_webhooks: the Standard Webhooks specification
//     (spec/standard-webhooks.md). Each delivery must carry the headers the
//     specification names, exactly: webhook-id (no full stop: it is part of
//     the signed content), webhook-timestamp (integer Unix seconds) and
//     webhook-signature (a space-delimited list of "v1,<base64 HMAC-SHA256>"
//     or "v1a,<base64 ed25519>" entries, at least one v1). The signature is
//     then verified with the specification's reference library
//     (standardwebhooks on npm, pinned in package.json):
//     `new Webhook(secret).verify(body, headers)`. The library also refuses
//     a timestamp more than five minutes from its clock; the fake signs with
//     the test's clock, so the check runs the library with its clock at the
//     delivery's own timestamp: a replay window is the receiver's to apply.
//   - hmac_sha256_hex and hmac_sha256_base64: exactly one header carries
//     the signature (an optional prefix such as "sha256=", then 64 lowercase
//     hex digits or the 44-character base64 of the 32-byte HMAC-SHA256),
//     another the delivery's ID (webhook-id, or a name ending in -Id or
//     -Delivery), and the signature must be the HMAC-SHA256 of the body, or
//     of "<timestamp>.<body>" for a header holding Unix seconds.
//
// Both: the body is JSON (the job document), sent as application/json by
// POST.
//
// The recording does not carry the signing secret, so the check verifies
// under the secrets of the Go tests that record callbacks (TEST_SECRETS);
// a delivery that none of them verifies is a violation.

import { createRequire } from "node:module";
import { createHmac, timingSafeEqual } from "node:crypto";

const require = createRequire(import.meta.url);
const { Webhook } = require("standardwebhooks");

export const CALLBACKS_BACKEND = "jobapi-callbacks";
export const SCHEME_STANDARD_WEBHOOKS = "standard_webhooks";
export const SCHEME_HEX_HMAC = "hmac_sha256_hex";
export const SCHEME_BASE64_HMAC = "hmac_sha256_base64";

// The secrets the recording Go tests sign their callbacks with: the
// Standard Webhooks specification's example secret (specSecret in
// internal/fakes/jobapi, testWhsec in adapters/rest) and the plain HMAC keys
// (testHMACKey in adapters/rest, the hmac test's key in internal/fakes/
// jobapi). Test values, not credentials.
export const TEST_SECRETS = [
  "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  "callback-hmac-key-0123456789",
  "hmac-key-for-tests",
];

// Where each kind of finding points in the specification.
const SPEC = {
  headers: "Standard Webhooks: webhook headers (webhook-id, webhook-timestamp, webhook-signature)",
  signature: "Standard Webhooks: signature scheme (HMAC-SHA256 of msg_id.timestamp.payload, v1,<base64>)",
  id: "Standard Webhooks: signature scheme (msg_id must not contain a full stop)",
  payload: "Standard Webhooks: payload structure (JSON in the HTTP body)",
  hmac: "adapters/rest EventsConfig: hmac_sha256_* schemes (one signature header, a delivery ID header)",
};

export const CALLBACK_EXCEPTIONS = {
  "callback-body-truncated": "the recorded body was cut at the recorder's limit, so its signature cannot be verified",
};

// headerValues returns every value of header name (case-insensitively).
function headerValues(headers, name) {
  const out = [];
  for (const [k, v] of Object.entries(headers || {})) {
    if (k.toLowerCase() === name.toLowerCase()) out.push(...(Array.isArray(v) ? v : [v]));
  }
  return out;
}

// one reads a header that must appear once; it records a violation and
// returns undefined otherwise.
function one(x, name, v, spec) {
  const vs = headerValues(x.request_headers, name);
  if (vs.length === 0) {
    v(`request.headers.${name}`, `the ${name} header is missing`, spec);
    return undefined;
  }
  if (vs.length > 1) {
    v(`request.headers.${name}`, `the ${name} header appears ${vs.length} times`, spec);
    return undefined;
  }
  return vs[0];
}

function base64Bytes(s) {
  return /^[A-Za-z0-9+/]+={0,2}$/.test(s) && s.length % 4 === 0 ? Buffer.from(s, "base64").length : -1;
}

// checkCallbackExchange returns the violations of one recorded callback,
// the known exceptions it hit, kind "event" (every callback is an event
// delivery) and whether its signature verified. secrets are tried in turn;
// one that verifies suffices.
export function checkCallbackExchange(x, { secrets = TEST_SECRETS } = {}) {
  const violations = [];
  const exceptions = [];
  const v = (where, message, schemaPath = "") => violations.push({ where, message, schemaPath });
  let verified = false;
  const done = () => ({ violations, exceptions, kind: "event", verified });

  if (String(x.method || "").toUpperCase() !== "POST") v("request.method", `a callback is a POST, not ${x.method}`, SPEC.payload);
  const body = x.request_body || "";
  const ct = headerValues(x.request_headers, "Content-Type")[0] || "";
  if (ct.split(";")[0].trim().toLowerCase() !== "application/json") {
    v("request.headers.content-type", `a callback's JSON body is sent as application/json, got ${JSON.stringify(ct)}`, SPEC.payload);
  }
  if (!x.truncated) {
    try {
      JSON.parse(body);
    } catch (e) {
      v("request.body", "the callback's body is not JSON: " + e.message, SPEC.payload);
    }
  }

  switch (x.operation) {
    case SCHEME_STANDARD_WEBHOOKS:
      verified = checkStandardWebhooks(x, body, secrets, v, exceptions);
      break;
    case SCHEME_HEX_HMAC:
    case SCHEME_BASE64_HMAC:
      verified = checkHMAC(x, body, secrets, v, exceptions);
      break;
    default:
      v("operation", `unknown signature scheme ${JSON.stringify(x.operation)} (want ${SCHEME_STANDARD_WEBHOOKS}, ${SCHEME_HEX_HMAC} or ${SCHEME_BASE64_HMAC})`);
  }
  return done();
}

// checkStandardWebhooks reports whether the signature verified.
function checkStandardWebhooks(x, body, secrets, v, exceptions) {
  const id = one(x, "webhook-id", v, SPEC.headers);
  const ts = one(x, "webhook-timestamp", v, SPEC.headers);
  const sig = one(x, "webhook-signature", v, SPEC.headers);
  let ok = true;
  if (id !== undefined && (id === "" || id.includes("."))) {
    v("request.headers.webhook-id", `webhook-id ${JSON.stringify(id)} is empty or contains a full stop`, SPEC.id);
    ok = false;
  }
  if (ts !== undefined && !/^[0-9]{1,11}$/.test(ts)) {
    v("request.headers.webhook-timestamp", `webhook-timestamp ${JSON.stringify(ts)} is not integer Unix seconds`, SPEC.headers);
    ok = false;
  }
  if (sig !== undefined) {
    let v1 = 0;
    let malformed = 0;
    for (const entry of sig.split(" ")) {
      const [version, value, ...rest] = entry.split(",");
      const n = value === undefined || rest.length ? -1 : base64Bytes(value);
      if (version === "v1" && n === 32) v1++;
      else if (!(version === "v1a" && n === 64)) {
        malformed++;
        v("request.headers.webhook-signature", `signature entry ${JSON.stringify(entry)} is neither v1,<base64 of 32 bytes> nor v1a,<base64 of 64 bytes>`, SPEC.signature);
      }
    }
    if (v1 === 0) {
      ok = false;
      if (malformed === 0) v("request.headers.webhook-signature", "no v1 (HMAC-SHA256) signature: a callback secret is symmetric", SPEC.signature);
    }
  }
  if (id === undefined || ts === undefined || sig === undefined || !ok) return false;
  if (x.truncated) {
    exceptions.push("callback-body-truncated");
    return false;
  }
  // The library checks the timestamp against its clock; run it at the
  // delivery's time.
  const headers = { "webhook-id": id, "webhook-timestamp": ts, "webhook-signature": sig };
  let last = "no secret to verify with";
  for (const secret of secrets) {
    let wh;
    try {
      wh = new Webhook(secret);
    } catch {
      continue; // not a whsec_ secret
    }
    const realNow = Date.now;
    Date.now = () => Number(ts) * 1000;
    try {
      wh.verify(body, headers, { jsonParse: false });
      return true;
    } catch (e) {
      last = e.message;
    } finally {
      Date.now = realNow;
    }
  }
  v("request.headers.webhook-signature", `the signature does not verify under the known secrets (standardwebhooks Webhook.verify: ${last})`, SPEC.signature);
  return false;
}

// The HTTP headers that carry no part of a signature scheme.
const PLAIN_HEADERS = new Set(["content-type", "user-agent", "content-length", "accept-encoding", "host", "traceparent", "tracestate", "date"]);

// checkHMAC reports whether the signature verified.
function checkHMAC(x, body, secrets, v, exceptions) {
  const hex = x.operation === SCHEME_HEX_HMAC;
  const shape = hex ? /^(?:[A-Za-z0-9_-]+=)?([0-9a-f]{64})$/ : /^(?:[A-Za-z0-9_-]+=)?([A-Za-z0-9+/]{43}=)$/;
  const what = hex ? "an optional prefix such as sha256= and 64 lowercase hex digits" : "an optional prefix such as sha256= and the 44-character base64 of 32 bytes";
  const headers = Object.entries(x.request_headers || {}).map(([k, vs]) => [k, Array.isArray(vs) ? vs : [vs]]);
  const signed = headers.filter(([k, vs]) => !PLAIN_HEADERS.has(k.toLowerCase()) && vs.some((s) => shape.test(s)));
  if (signed.length === 0) {
    v("request.headers", `no header carries the ${hex ? "hex" : "base64"} HMAC-SHA256 signature (${what})`, SPEC.hmac);
    return false;
  }
  if (signed.length > 1 || signed[0][1].length > 1) {
    v("request.headers", `more than one signature value: ${signed.map(([k]) => k).join(", ")}`, SPEC.hmac);
    return false;
  }
  const [sigName, [sigValue]] = signed[0];
  const ids = headers.filter(([k, vs]) => /(^|-)(id|delivery)$/i.test(k) && vs.length === 1 && vs[0] !== "");
  if (ids.length === 0) v("request.headers", "no delivery ID header (webhook-id, or a header named …-Id or …-Delivery)", SPEC.hmac);
  if (x.truncated) {
    exceptions.push("callback-body-truncated");
    return false;
  }
  const want = Buffer.from(shape.exec(sigValue)[1], hex ? "hex" : "base64");
  // The signed content: the body, or "<timestamp>.<body>" for a header of
  // Unix seconds.
  const contents = [body];
  for (const [k, vs] of headers) {
    if (k !== sigName && vs.length === 1 && /^[0-9]{9,11}$/.test(vs[0])) contents.push(`${vs[0]}.${body}`);
  }
  for (const secret of secrets) {
    for (const c of contents) {
      const got = createHmac("sha256", secret).update(c).digest();
      if (got.length === want.length && timingSafeEqual(got, want)) return true;
    }
  }
  v(`request.headers.${sigName.toLowerCase()}`, `the signature is not the HMAC-SHA256 of the body (nor of "<timestamp>.<body>" for a Unix-seconds header) under the known secrets`, SPEC.hmac);
  return false;
}
