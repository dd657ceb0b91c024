#!/usr/bin/env bash
# Builds celcost and prints the binary's path (default ~/.cache/kubeadmit/celcost; set CELCOST_OUT
# for another folder). It is built exactly as kubeadmit is (../shared/tools/kubeadmit/build.sh):
# GOPATH mode with the Go toolchain and the Go sources of k8s.io/apiserver and its dependencies that
# kubeadmit's build unpacked from Debian under ~/.cache/kubeadmit/root, and kubeadmit's GOCACHE.
# It downloads nothing: without that cache it fails with one line. Rebuilds only when a source
# file or this script changed.
set -euo pipefail
SRC=$(cd "$(dirname "$0")" && pwd)
CACHE=$HOME/.cache/kubeadmit
OUT=${CELCOST_OUT:-$CACHE}
ROOT=$CACHE/root
BIN=$OUT/celcost
fresh=1; for f in "$SRC"/*.go "$0"; do [ "$BIN" -nt "$f" ] || fresh=0; done
if [ -x "$BIN" ] && [ $fresh = 1 ]; then echo "$BIN"; exit 0; fi
[ -f "$ROOT/.complete" ] || { echo "celcost: kubeadmit's Go cache ($ROOT) is absent; run ../shared/tools/kubeadmit/build.sh first" >&2; exit 1; }
mkdir -p "$OUT"
GOV=$(cat "$ROOT/.go-version")
export GOROOT=$ROOT/usr/lib/go-$GOV PATH=$ROOT/usr/lib/go-$GOV/bin:$PATH GO111MODULE=off GOFLAGS= GOTOOLCHAIN=local
GP=$CACHE/gopath
mkdir -p "$GP/src"; rm -rf "$GP/src/celcost"; mkdir -p "$GP/src/celcost"; cp "$SRC"/*.go "$GP/src/celcost/"
# The built-in types' structured-merge-diff schema that client-go ships (openapi.go embeds it).
sed -n '/^var schemaYAML = typed.YAMLObject(`/,/^`)/p' "$ROOT/usr/share/gocode/src/k8s.io/client-go/applyconfigurations/internal/internal.go" \
  | sed '1s/^var schemaYAML = typed.YAMLObject(`//; $d' > "$GP/src/celcost/schema.yaml"
[ -s "$GP/src/celcost/schema.yaml" ] || { echo "celcost: client-go's schema not found in $ROOT" >&2; exit 1; }
export GOPATH=$GP:$ROOT/usr/share/gocode GOCACHE=${GOCACHE:-$CACHE/gocache}
(cd "$GP/src/celcost" && go build -trimpath -ldflags=-s -o "$BIN.tmp" . >&2) && mv "$BIN.tmp" "$BIN"
echo "$BIN"
