#!/usr/bin/env bash
# Builds Jaeger (the Go module github.com/jaegertracing/jaeger, pinned in go.mod: its `jaeger`
# binary, whose default is the all-in-one backend) for the tracing test, into a cache directory
# outside the cargo target dir, like the control plane:
#   ${KUBEFORGE_CACHE:-$HOME/.cache/kubeforge}/jaeger/<version>-<hash of go.mod/go.sum>/bin/jaeger
# Prints that bin directory as its last line. A second call with a complete cache returns at once.
set -euo pipefail
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
here=$(cd "$(dirname "$0")" && pwd)
version=$(awk '$1 == "github.com/jaegertracing/jaeger" { print $2; exit }' "$here/go.mod")
cache_root=${KUBEFORGE_CACHE:-$HOME/.cache/kubeforge}
key="${version}-$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)"
bin="$cache_root/jaeger/$key/bin"

if [[ -x $bin/jaeger ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$bin.partial"
cd "$here"
start=$(date +%s)
echo "jaeger: building $version into $bin (a cold build takes several minutes)" >&2
go build -trimpath -ldflags "-s -w" -o "$bin.partial/jaeger" github.com/jaegertracing/jaeger/cmd/jaeger >&2
rm -rf "$bin"
mv "$bin.partial" "$bin"
echo "jaeger: built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
