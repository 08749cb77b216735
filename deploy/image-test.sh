#!/usr/bin/env bash
# The image test (`make image-test`): builds the jobbridge image offline from
# deploy/Containerfile with podman and checks it without running a container
# (this machine refuses to run them): the image is mounted and its own binary
# is run from the mounted root.
#
# Checks: the image holds nothing but the binary, the CA certificates,
# /etc/passwd, /etc/group and the store directory (owned by 65532); the
# binary is static (CGO_ENABLED=0, no ELF interpreter); the image's config
# runs as 65532:65532 with the store on the /var/lib/jobbridge volume, port
# 8080 and the OCI labels; the image's binary, run from an empty directory,
# prints its version and validates the demo catalog built into it
# (`jobbridge demo --check`). Prints the image size and the time taken.
#
# Needs podman (Debian's package podman: apt-get install podman), readelf
# (Debian's package binutils) and Go.
# As root it mounts the image directly; otherwise inside `podman unshare`.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
start=$(date +%s)

if ! command -v podman >/dev/null 2>&1; then
  echo "image-test: podman is not installed (Debian: apt-get install podman)" >&2
  exit 1
fi
if ! command -v readelf >/dev/null 2>&1; then
  echo "image-test: readelf is not installed (Debian: apt-get install binutils)" >&2
  exit 1
fi

ctx=$(mktemp -d)
tag="localhost/jobbridge-image-test:$$"
mounted=""
cleanup() {
  if [ -n "$mounted" ]; then podman image unmount "$tag" >/dev/null 2>&1 || true; fi
  podman rmi -f "$tag" >/dev/null 2>&1 || true
  rm -rf "$ctx"
}
trap cleanup EXIT

version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)

# The staging context: what deploy/Containerfile copies.
CGO_ENABLED=0 "$GO" build -trimpath -ldflags="-s -w" -o "$ctx/jobbridge" ./cmd/jobbridge
cp /etc/ssl/certs/ca-certificates.crt "$ctx/ca-certificates.crt"
cp deploy/image/passwd deploy/image/group "$ctx/"
mkdir "$ctx/state"

podman build --quiet --layers=false --network=none --pull=never -f deploy/Containerfile \
  --build-arg VERSION="$version" --build-arg REVISION="$revision" \
  -t "$tag" "$ctx" >/dev/null

fail() { echo "image-test: FAIL: $*" >&2; exit 1; }

# The image's configuration.
inspect() { podman image inspect --format "$1" "$tag"; }
[ "$(inspect '{{.Config.User}}')" = "65532:65532" ] || fail "user is $(inspect '{{.Config.User}}'), want 65532:65532"
[ "$(inspect '{{json .Config.Entrypoint}}')" = '["/usr/local/bin/jobbridge"]' ] || fail "entrypoint $(inspect '{{json .Config.Entrypoint}}')"
inspect '{{json .Config.Volumes}}' | grep -q '"/var/lib/jobbridge"' || fail "no /var/lib/jobbridge volume"
inspect '{{json .Config.ExposedPorts}}' | grep -q '"8080/tcp"' || fail "port 8080 not exposed"
inspect '{{json .Config.Env}}' | grep -q 'JOBBRIDGE_STORE=sqlite:/var/lib/jobbridge/tasks.db' || fail "JOBBRIDGE_STORE not set to the volume"
for label in org.opencontainers.image.source org.opencontainers.image.licenses io.modelcontextprotocol.server.name; do
  [ -n "$(inspect "{{index .Config.Labels \"$label\"}}")" ] || fail "label $label missing"
done
[ "$(inspect '{{index .Config.Labels "org.opencontainers.image.version"}}')" = "$version" ] || fail "version label is not $version"

# The image's files, and its own binary run from the mounted root.
check_root() {
  local root=$1
  local files
  files=$(cd "$root" && find . -mindepth 1 \( -type f -o -type l \) -printf '%p\n' | sort | tr '\n' ' ')
  local want="./etc/group ./etc/passwd ./etc/ssl/certs/ca-certificates.crt ./usr/local/bin/jobbridge "
  [ "$files" = "$want" ] || fail "image files: $files; want $want"
  [ "$(stat -c %u:%g "$root/var/lib/jobbridge")" = "65532:65532" ] || fail "/var/lib/jobbridge is owned by $(stat -c %u:%g "$root/var/lib/jobbridge")"
  grep -q '^jobbridge:x:65532:65532:' "$root/etc/passwd" || fail "no jobbridge user in /etc/passwd"
  local bin=$root/usr/local/bin/jobbridge
  "$GO" version -m "$bin" | grep -q 'CGO_ENABLED=0' || fail "binary not built with CGO_ENABLED=0"
  local headers
  headers=$(readelf -l "$bin") || fail "readelf -l of the binary failed (readelf is in Debian's binutils)"
  if grep -q 'program interpreter' <<<"$headers"; then fail "binary is dynamically linked"; fi
  # The binary's own files only: run it from an empty directory, so that
  # nothing of the checkout (configs/demo.yaml) can stand in for them.
  local empty
  empty=$(mktemp -d)
  local out
  out=$(cd "$empty" && "$bin" version) || fail "the image's binary: version failed"
  echo "image-test: $(head -1 <<<"$out")"
  # The demo catalog built into the binary, loaded and validated as
  # `jobbridge demo` would serve it (exit 1 and the problems when invalid).
  out=$(cd "$empty" && "$bin" demo --check) || fail "the image's binary: demo --check failed: $out"
  grep -q '^configs/demo.yaml (embedded): ok (' <<<"$out" || fail "demo --check printed: $out"
  echo "image-test: $out"
  [ -z "$(ls -A "$empty")" ] || fail "the image's binary wrote into the directory it ran in"
  rmdir "$empty"
}

if [ "$(id -u)" -eq 0 ]; then
  mnt=$(podman image mount "$tag")
  mounted=1
  check_root "$mnt"
else
  export -f check_root fail
  export GO tag
  podman unshare bash -c 'mnt=$(podman image mount "$tag") && check_root "$mnt"; rc=$?; podman image unmount "$tag" >/dev/null; exit $rc'
fi

size=$(podman image inspect --format '{{.Size}}' "$tag")
echo "image-test: ok: image $version, $((size / 1024 / 1024)) MiB ($size bytes), $(( $(date +%s) - start )) s"
