#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kubectl and etcd from the pinned upstream Go
# modules into a cache directory outside the cargo target dir, keyed by version:
#   ${KUBEFORGE_CACHE:-$HOME/.cache/kubeforge}/controlplane/<k8s>-<etcd>-<hash of go.mod/go.sum>/bin
# Prints that bin directory as its last line. A second call with a complete cache returns at once.
set -euo pipefail
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}   # go.mod's `go` line decides; auto fetches a newer one if needed
here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.env"

cache_root=${KUBEFORGE_CACHE:-$HOME/.cache/kubeforge}
# The key covers what decides the binaries: the pinned module graph and our etcd main.
key="${K8S_VERSION}-etcd${ETCD_VERSION}-$(cat "$here/go.mod" "$here/go.sum" "$here/cmd/etcd/main.go" | sha256sum | cut -c1-12)"
bin="$cache_root/controlplane/$key/bin"
tools=(kube-apiserver kube-controller-manager kubectl etcd)

complete=1
for t in "${tools[@]}"; do [[ -x $bin/$t ]] || complete=0; done
if ((complete)); then
  echo "$bin"
  exit 0
fi

mkdir -p "$bin.partial"
cd "$here"
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
stamp() {
  local k=$1 v=$2
  printf -- "-X 'k8s.io/component-base/version.%s=%s' -X 'k8s.io/client-go/pkg/version.%s=%s' " "$k" "$v" "$k" "$v"
}
ldflags="-s -w $(stamp gitVersion "$K8S_VERSION") $(stamp gitMajor 1) $(stamp gitMinor "$minor") \
$(stamp gitTreeState clean) $(stamp buildDate "$(date -u +%Y-%m-%dT%H:%M:%SZ)")"

start=$(date +%s)
echo "controlplane: building kubernetes $K8S_VERSION and etcd $ETCD_VERSION into $bin (cold builds take a while)" >&2
go build -trimpath -ldflags "$ldflags" -o "$bin.partial/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kubectl >&2
go build -trimpath -ldflags "-s -w" -o "$bin.partial/etcd" ./cmd/etcd >&2
rm -rf "$bin"
mv "$bin.partial" "$bin"
echo "controlplane: built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
