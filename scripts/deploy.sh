#!/bin/sh
# Turns an image reference into what `make deploy` and `make helm-deploy` pass on, so both install
# the image named by IMAGE (registry[:port]/path[:tag][@sha256:digest]).
#
#   sh scripts/deploy.sh kustomization IMAGE OVERLAY DIR   # DIR/kustomization.yaml: manifests/OVERLAY with IMAGE
#   sh scripts/deploy.sh helm-args IMAGE                   # the --set flags for the chart
set -eu

image=$2
name=$image tag= digest=
case $image in
  *@*) name=${image%%@*} digest=${image#*@} ;;
esac
# A tag is a colon in the last path component (a colon before it is a registry port).
case ${name##*/} in
  *:*) tag=${name##*:} name=${name%:*} ;;
esac
[ -n "$tag$digest" ] || tag=latest

case $1 in
  kustomization)
    overlay=$3 dir=$4
    mkdir -p "$dir"
    {
      echo "# Written by make deploy (scripts/deploy.sh); git-ignored."
      echo "apiVersion: kustomize.config.k8s.io/v1beta1"
      echo "kind: Kustomization"
      echo "resources:"
      echo "  - ../manifests/$overlay"
      echo "images:"
      echo "  - name: ghcr.io/sidecar-injector/sidecar-injector"
      echo "    newName: $name"
      if [ -n "$digest" ]; then echo "    digest: $digest"; else echo "    newTag: \"$tag\""; fi
    } > "$dir/kustomization.yaml"
    ;;
  helm-args)
    printf -- '--set-string image.repository=%s' "$name"
    if [ -n "$digest" ]; then printf -- ' --set-string image.digest=%s' "$digest"; else printf -- ' --set-string image.tag=%s' "$tag"; fi
    echo
    ;;
  *)
    echo "usage: $0 kustomization IMAGE OVERLAY DIR | helm-args IMAGE" >&2
    exit 2
    ;;
esac
