#!/usr/bin/env bash
# Runs the official MCP client packages, pinned in clients/package.json,
# against the real jobbridge binary serving clients/catalog.yaml through
# `jobbridge demo` (every tool backed by the REST job API fake):
#
#   - @modelcontextprotocol/client 2.4.0 with @modelcontextprotocol/ext-tasks
#     0.2.2 (protocol 2026-07-28, the Tasks extension): test/modern.test.mjs,
#     and its subscriptions/listen for notifications/tasks: test/listen.test.mjs;
#   - @modelcontextprotocol/sdk 1.32.2, the v1 SDK behind most desktop clients
#     (protocol 2025-11-25, experimental tasks): test/legacy.test.mjs, and
#     read as a structuredContent-only and a text-only client, and the 2.x
#     client declaring no extension (as Claude Code calls in print mode)
#     following the handle: test/results.test.mjs;
#
# each over Streamable HTTP (`demo --listen 127.0.0.1:0`, the address read
# from its log) and over stdio (the client spawns `demo --stdio`); and,
# over Streamable HTTP, the clients that speak no tasks and so follow long
# jobs through the handle mode (after_sync_budget: return_handle):
#
#   - @ai-sdk/mcp 2.0.99, the Vercel AI SDK's MCP client: test/aisdk.test.mjs;
#   - github.com/mark3labs/mcp-go v1.2.1, in the Go program mcpgo/ (its own
#     go.mod, so that the server module does not depend on it), built here
#     with `go build` and run by test/mcpgo.test.mjs.
#
# It prints one line per test and a summary, and exits non-zero if any test
# failed. Arguments are passed to `node --test` (e.g. a test file, or
# --test-name-pattern=cancel).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

if [[ ! -d "$here/node_modules" ]]; then
  echo "installing the client packages (npm ci)..."
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
fi

echo "building jobbridge..."
go build -o "$tmp/jobbridge" ./cmd/jobbridge
export JOBBRIDGE_BIN="$tmp/jobbridge"
echo "building the mcp-go client program..."
(cd "$here/mcpgo" && go build -o "$tmp/mcpgo" .)
export MCPGO_BIN="$tmp/mcpgo"
# Each demo keeps its task store in a fresh temporary directory: keep them
# all under this run's directory, removed on exit.
mkdir -p "$tmp/state"
export TMPDIR="$tmp/state"

cd "$here"
if [[ $# -eq 0 ]]; then
  set -- test/modern.test.mjs test/listen.test.mjs test/legacy.test.mjs test/results.test.mjs test/aisdk.test.mjs test/mcpgo.test.mjs test/legacy-push.test.mjs
fi
rc=0
node --test --test-reporter=spec --test-concurrency=2 "$@" 2>&1 | tee "$tmp/out" || rc=$?
passed="$(sed -n 's/^ℹ pass \([0-9]*\)$/\1/p' "$tmp/out" | tail -n 1)"
failed="$(sed -n 's/^ℹ fail \([0-9]*\)$/\1/p' "$tmp/out" | tail -n 1)"
echo
echo "clients: ${passed:-0} passed, ${failed:-0} failed"
if [[ "$rc" -eq 0 && -z "$passed" ]]; then
  echo "clients: node --test ran no test" >&2
  rc=1
fi
exit "$rc"
