#!/usr/bin/env bash
# Builds the tools the chart tests need, from their Go modules at pinned
# versions, into ${SIGLAKE_INTEROP_CACHE:-$HOME/.cache/siglake-interop}/helm/bin.
# Idempotent: a tool already built at its pinned version is kept. Needs Go 1.26
# (an older go fetches it with GOTOOLCHAIN=auto) and the Go module proxy;
# nothing else is fetched.
#
#   helm        helm.sh/helm/v3 (helm lint, helm template)
#   kubecheck   test/interop/helm/kubecheck: strict decoding of rendered
#               manifests into the pinned k8s.io/api types (offline schema check)
set -euo pipefail

HELM_VERSION=v3.21.4
here="$(cd "$(dirname "$0")" && pwd)"
cache="${SIGLAKE_INTEROP_CACHE:-$HOME/.cache/siglake-interop}/helm"
bin="$cache/bin"
mkdir -p "$bin"

if [ ! -x "$bin/helm" ] || [ "$(cat "$bin/helm.version" 2>/dev/null)" != "$HELM_VERSION" ]; then
  echo "building helm $HELM_VERSION into $bin" >&2
  GOBIN="$bin" CGO_ENABLED=0 nice -n 10 go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  echo "$HELM_VERSION" > "$bin/helm.version"
fi

# kubecheck is rebuilt when its source changes (go build's cache makes a
# rebuild of unchanged source cheap).
sum="$(cat "$here/kubecheck/go.mod" "$here/kubecheck/go.sum" "$here/kubecheck/main.go" | sha256sum | cut -d' ' -f1)"
if [ ! -x "$bin/kubecheck" ] || [ "$(cat "$bin/kubecheck.sum" 2>/dev/null)" != "$sum" ]; then
  echo "building kubecheck into $bin" >&2
  (cd "$here/kubecheck" && CGO_ENABLED=0 nice -n 10 go build -o "$bin/kubecheck" .)
  echo "$sum" > "$bin/kubecheck.sum"
fi
echo "$bin"
