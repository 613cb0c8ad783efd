#!/usr/bin/env bash
# Packs what `native-bench/run.mjs --no-build` needs on a machine that has no
# Node.js, no wrk or h2load and no registry to install them from (an x86-64
# Linux with a glibc at least as new as this one's): this machine's node
# binary, the production node_modules without the query side's DuckDB (the
# ingester and loadgen do not load it) and with only this platform's uWS
# binary, the built dist/ and native addon, and wrk and h2load with the shared
# libraries they link beyond glibc. About 40 MB.
#
#   npm ci && npm run build && native-bench/pack-portable.sh .devrun
#   # there, in a checkout of the same commit:
#   . .devrun/unpack.sh && native-bench/many-cores.sh OUTDIR
#
# unpack.sh puts node_modules/, dist/ and native/build/Release/ in place and
# the packed node, wrk and h2load first on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:?usage: native-bench/pack-portable.sh DIR}
[ -f dist/cli.js ] && [ -f native/build/Release/siglake_native.node ] || { echo 'build first: npm run build' >&2; exit 1; }
for t in wrk h2load xz; do command -v "$t" >/dev/null || { echo "$t not found (apt-get install wrk nghttp2-client xz-utils)" >&2; exit 1; }; done
rm -rf "$dest" && mkdir -p "$dest/bin" "$dest/lib"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# The production dependency closure, less DuckDB (query side only) and what
# only a build or an editor reads.
npm ls --omit=dev --parseable --all 2>/dev/null | sed "s#^$PWD/##" | grep '^node_modules/' |
  awk -F/ '{ print ($2 ~ /^@/) ? $1 "/" $2 "/" $3 : $1 "/" $2 }' | grep -v '@duckdb' | sort -u >"$stage/deps"
tar -cf - --exclude='node_modules/uWebSockets.js/binaries/*' --exclude='node_modules/better-sqlite3/deps' \
  --exclude='node_modules/better-sqlite3/src' --exclude='node_modules/better-sqlite3/build/Release/obj*' \
  --exclude='node_modules/better-sqlite3/build/Release/.deps' --exclude='node_modules/better-sqlite3/build/deps' \
  --exclude='*.d.ts' --exclude='*.map' -T "$stage/deps" | tar -xf - -C "$stage"
uws=uws_$(node -p 'process.platform + "_" + process.arch + "_" + process.versions.modules').node
mkdir -p "$stage/node_modules/uWebSockets.js/binaries"
cp "node_modules/uWebSockets.js/binaries/$uws" "$stage/node_modules/uWebSockets.js/binaries/"
tar -cf - -C "$stage" node_modules | xz -T0 -6 >"$dest/node_modules.tar.xz"
tar -cf - dist native/build/Release/siglake_native.node | xz -T0 -6 >"$dest/dist.tar.xz"
xz -T0 -6 -c "$(readlink -f "$(command -v node)")" >"$dest/node.xz"

# wrk and h2load, each behind a wrapper that points the loader at the libraries packed beside it.
for t in wrk h2load; do
  bin=$(readlink -f "$(command -v $t)")
  # A Debian wrapper script is not the binary: take the ELF file.
  head -c 4 "$bin" | grep -q ELF || { echo "$bin is not an ELF binary" >&2; exit 1; }
  cp "$bin" "$dest/bin/$t.bin"
  ldd "$bin" | awk '$3 ~ /^\// { print $3 }' | grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' | while read -r lib; do cp -L "$lib" "$dest/lib/"; done
  printf '#!/bin/sh\nd=$(dirname "$(readlink -f "$0")")\nLD_LIBRARY_PATH="$d/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/%s.bin" "$@"\n' "$t" >"$dest/bin/$t"
  chmod +x "$dest/bin/$t"
done

cat >"$dest/unpack.sh" <<'EOF'
# Sourced from the checkout's root: unpacks what pack-portable.sh packed.
_pk=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ ! -x "$_pk/bin/node" ]; then
  if command -v xz >/dev/null; then xz -dc "$_pk/node.xz" >"$_pk/bin/node"
  else python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$_pk/node.xz" "$_pk/bin/node"; fi
  chmod +x "$_pk/bin/node"
fi
for _f in node_modules dist; do
  if command -v xz >/dev/null; then xz -dc "$_pk/$_f.tar.xz" | tar -xf -
  else python3 -c 'import lzma,sys,tarfile; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall(".")' "$_pk/$_f.tar.xz"; fi
done
export PATH="$_pk/bin:$PATH"
unset _pk _f
EOF
du -sh "$dest"
