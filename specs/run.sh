#!/usr/bin/env bash
# Checks the GitHub and Batch fakes, and the requests the adapters send them,
# against the official API descriptions, and the job API fake's signed
# callbacks against the Standard Webhooks specification:
#   - GitHub: @octokit/openapi (GitHub's OpenAPI description of api.github.com),
#     REST exchanges and webhook deliveries, and the x-ratelimit-* headers
#     GitHub sends on every REST answer (injected faults included)
#   - AWS Batch: the batch-2016-08-10 service model of the AWS SDK for
#     JavaScript v2 (aws-sdk), with enums and declared errors read from the
#     v3 client (@aws-sdk/client-batch) generated from the same model; REST
#     exchanges and EventBridge event deliveries; an error type an operation
#     does not declare must be one of AWS's common errors (injected faults
#     included)
#   - job API callbacks: signatures verified with the specification's
#     reference library (standardwebhooks), the hmac_sha256_* schemes' headers
#     and HMACs
# All the packages are pinned exactly in specs/package-lock.json.
#
# Steps:
#   1. the checker's own tests (node:test, on the samples in specs/testdata/);
#   2. the Go tests of the adapters and fakes, with JOBBRIDGE_EXCHANGES set so
#      that the fakes record every HTTP exchange they serve as JSONL;
#   3. the checker over those recordings. It prints, per backend, how many
#      exchanges it checked and how many violations it found, and fails on any
#      violation, or when a backend recorded nothing (--require; for GitHub and
#      Batch also no event delivery), so that a recorder that writes nothing
#      cannot pass silently.
#
# Usage: specs/run.sh            (from anywhere; GO overrides the go binary)
set -euo pipefail
cd "$(dirname "$0")"
GO="${GO:-go}"

# The pinned npm packages. .ci/run installs them with `npm ci`; a developer
# who has not yet done so gets them here.
if [ ! -d node_modules/@octokit/openapi ] || [ ! -d node_modules/aws-sdk ] || [ ! -d node_modules/@aws-sdk/client-batch ] ||
  [ ! -d node_modules/standardwebhooks ]; then
  npm ci --no-audit --no-fund
fi

echo "== spec-check: checker tests"
node --test test/

exchanges="$(mktemp -d)"
trap 'rm -rf "$exchanges"' EXIT

echo "== spec-check: recording exchanges from the adapter and fake tests"
# A failing Go test fails the target, but the recordings are checked anyway,
# so that one run shows both.
go_rc=0
(cd .. && JOBBRIDGE_EXCHANGES="$exchanges" "$GO" test -count=1 \
  ./adapters/githubactions/ ./adapters/awsbatch/ ./adapters/rest/ \
  ./internal/fakes/githubfake/ ./internal/fakes/batchfake/ ./internal/fakes/jobapi/) || go_rc=$?

echo "== spec-check: checking the recorded exchanges against the official descriptions"
check_rc=0
node check.mjs --require github,batch,jobapi-callbacks "$exchanges" || check_rc=$?

if [ "$go_rc" -ne 0 ]; then
  echo "spec-check: the Go tests that record the exchanges failed (exit $go_rc)"
  exit "$go_rc"
fi
exit "$check_rc"
