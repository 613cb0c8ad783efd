#!/usr/bin/env bash
# Builds the SeaweedFS server binary (`weed`) from its Go module at a pinned
# version, for the S3 warehouse tests (test/interop/s3-*.test.ts).
#
# SeaweedFS tags its releases as "3.xx" (no leading "v"), which the Go module
# proxy does not treat as semantic versions, so the pin is the proxy's
# pseudo-version of a fixed upstream commit. Its go.mod has a replace
# directive, which `go install pkg@version` refuses, so the module is fetched
# with `go mod download` (checksummed against sum.golang.org) and built as the
# main module. Idempotent: a binary already built for this pin is reused.
#
#   SIGLAKE_INTEROP_CACHE  cache root (default ~/.cache/siglake-interop)
#   SEAWEEDFS_VERSION      override the pinned module version
set -euo pipefail

version="${SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}"
cache="${SIGLAKE_INTEROP_CACHE:-$HOME/.cache/siglake-interop}"
dest="$cache/seaweedfs"
stamp="$dest/VERSION"

if [ -x "$dest/weed" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$version" ]; then
  echo "seaweedfs $version already built at $dest/weed"
  exit 0
fi

command -v go >/dev/null 2>&1 || { echo "install.sh: go is required (https://go.dev/dl/ or apt-get install golang-go)" >&2; exit 1; }

mkdir -p "$dest"
start=$(date +%s)
echo "building seaweedfs $version into $dest (this takes several minutes)"
# CGO off: a static binary, no C toolchain needed; nice: the build machine is shared.
src=$(go mod download -json "github.com/seaweedfs/seaweedfs@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$src" ] && [ -f "$src/go.mod" ] || { echo "install.sh: go mod download gave no source directory" >&2; exit 1; }
(cd "$src" && CGO_ENABLED=0 nice -n 10 go build -trimpath -o "$dest/weed.tmp" ./weed)
mv "$dest/weed.tmp" "$dest/weed"
echo "$version" > "$stamp"
echo "seaweedfs built in $(( $(date +%s) - start ))s: $("$dest/weed" version 2>/dev/null | head -1)"
