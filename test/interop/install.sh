#!/usr/bin/env bash
# Installs the interop peers (test/interop/*.test.ts) into a cache outside the
# clone: ${SIGLAKE_INTEROP_CACHE:-$HOME/.cache/siglake-interop}
#   venv/         Python: pyiceberg, pyarrow, pyspark, the OpenTelemetry SDK (requirements.txt, constraints.txt)
#   jars/         Iceberg's Spark runtime and the JDBC drivers (jars.txt), via Maven (m2/ is its local repository)
#   otelcol/      the OpenTelemetry Collector built from collector/ (go.mod), when collector/ exists
#   seaweedfs/    the SeaweedFS S3 server (seaweedfs/install.sh)
# Idempotent: each part carries a stamp of its manifest and is skipped when the
# stamp matches, so a second run downloads nothing. Needs python3 (with venv),
# Java 17 and Maven, Go.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${SIGLAKE_INTEROP_CACHE:-$HOME/.cache/siglake-interop}
mkdir -p "$cache"
say() { printf 'interop install [%ss]: %s\n' "$SECONDS" "$*"; }
stamp_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

# --- Python venv
want=$(stamp_of "$here/requirements.txt" "$here/constraints.txt")
if [ "$(cat "$cache/venv/.stamp" 2>/dev/null)" = "$want" ]; then
  say "venv up to date"
else
  say "venv: installing requirements.txt (pyspark is a large download)"
  rm -rf "$cache/venv"
  python3 -m venv "$cache/venv"
  nice -n 10 "$cache/venv/bin/pip" install --disable-pip-version-check -q -r "$here/requirements.txt" -c "$here/constraints.txt"
  echo "$want" > "$cache/venv/.stamp"
fi

# --- jars for Spark
mkdir -p "$cache/jars"
grep -v '^#' "$here/jars.txt" | grep -v '^$' | while read -r coord; do
  IFS=: read -r _ artifact version <<<"$coord"
  if [ -s "$cache/jars/$artifact-$version.jar" ]; then
    continue
  fi
  say "jar: $coord"
  nice -n 10 mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$cache/m2" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
    -Dartifact="$coord" -DoutputDirectory="$cache/jars"
done
say "jars: $(ls "$cache/jars" | tr '\n' ' ')"

# --- the OpenTelemetry Collector (test/interop/collector: main.go, go.mod, go.sum)
if [ -f "$here/collector/go.mod" ]; then
  want=$(stamp_of "$here/collector/go.mod" "$here/collector/go.sum" "$here"/collector/*.go)
  if [ -x "$cache/otelcol/otelcol-interop" ] && [ "$(cat "$cache/otelcol/.stamp" 2>/dev/null)" = "$want" ]; then
    say "collector up to date"
  else
    say "collector: go build (first time: downloads the modules, several minutes)"
    mkdir -p "$cache/otelcol" "$cache/go/mod" "$cache/go/build"
    (cd "$here/collector" && GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOFLAGS=-mod=readonly \
      nice -n 10 go build -trimpath -o "$cache/otelcol/otelcol-interop" .)
    echo "$want" > "$cache/otelcol/.stamp"
  fi
fi
say "done: $cache"

# --- SeaweedFS, the S3 server of the s3-*.test.ts suites (its own script, pinned there)
bash "$here/seaweedfs/install.sh"
