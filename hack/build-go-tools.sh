#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kubectl, etcd, helm and promtool from Go modules.
# Why a wrapper module: k8s.io/kubernetes pins its staging modules at v0.0.0 with relative
# replace directives, so `go install` refuses it; we require it from a throwaway module and
# pin each staging module to its published v0.Y.Z instead. Binaries are cached per version.
source "$(dirname "$0")/lib.sh"
go_env
command -v go >/dev/null || die "go is not installed (need Go >= 1.25)"

build_kubernetes() {
  local out="$BIN_DIR/kubernetes-$KUBERNETES_VERSION"
  if [[ -x "$out/kube-apiserver" && -x "$out/kube-controller-manager" && -x "$out/kubectl" ]]; then return; fi
  local work="$CACHE_DIR/src/kubernetes-$KUBERNETES_VERSION"
  mkdir -p "$work" "$out"
  log "building kube-apiserver, kube-controller-manager, kubectl v$KUBERNETES_VERSION (cold: ~15-25 min on 2 cores)"
  (
    cd "$work"
    rm -f go.mod go.sum
    go mod init local/k8sbins >/dev/null 2>&1
    cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
    local gomod
    gomod=$(go mod download -json "k8s.io/kubernetes@v$KUBERNETES_VERSION" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
    local staging_version="v0.${KUBERNETES_VERSION#1.}"
    for m in $(sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*#\1#p' "$gomod"); do
      go mod edit -replace="$m=$m@$staging_version"
    done
    go mod edit -require="k8s.io/kubernetes@v$KUBERNETES_VERSION"
    go mod tidy -e >/dev/null 2>&1 || true
    go mod download
    local minor="${KUBERNETES_VERSION#1.}"; minor="${minor%%.*}"
    local ld=""
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld+=" -X $pkg.gitVersion=v$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
      ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    done
    go build -trimpath -ldflags "-s -w $ld" -o "$out/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
  )
}

build_etcd() {
  local out="$BIN_DIR/etcd-$ETCD_VERSION"
  if [[ -x "$out/etcd" ]]; then return; fi
  local work="$CACHE_DIR/src/etcd-$ETCD_VERSION"
  mkdir -p "$work" "$out"
  log "building etcd v$ETCD_VERSION"
  (
    cd "$work"
    rm -f go.mod go.sum
    go mod init local/etcdbin >/dev/null 2>&1
    cat > main.go <<'GO'
// Command etcd runs the etcd server; the upstream main lives in a module with relative replaces.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >/dev/null
    go mod tidy >/dev/null
    go build -trimpath -ldflags "-s -w" -o "$out/etcd" .
  )
}

build_helm() {
  local out="$BIN_DIR/helm-$HELM_VERSION"
  if [[ -x "$out/helm" ]]; then return; fi
  mkdir -p "$out"
  log "building helm v$HELM_VERSION"
  GOBIN="$out" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=v$HELM_VERSION" \
    "helm.sh/helm/v4/cmd/helm@v$HELM_VERSION"
}

build_promtool() {
  local out="$BIN_DIR/promtool-$PROMETHEUS_MODULE_VERSION"
  if [[ -x "$out/promtool" ]]; then return; fi
  mkdir -p "$out"
  # Module 0.316.0 is Prometheus 3.16.0: major = first digit of the minor, minor = the rest.
  local mm="${PROMETHEUS_MODULE_VERSION#0.}"; mm="${mm%%.*}"
  local release="${mm:0:1}.$((10#${mm:1})).${PROMETHEUS_MODULE_VERSION##*.}"
  log "building promtool (Prometheus $release, module v$PROMETHEUS_MODULE_VERSION; cold: ~5-10 min on 2 cores)"
  GOBIN="$out" go install -trimpath \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$release" \
    "github.com/prometheus/prometheus/cmd/promtool@v$PROMETHEUS_MODULE_VERSION"
}

build_etcd
build_helm
build_promtool
build_kubernetes
ln -sfn "kubernetes-$KUBERNETES_VERSION/kube-apiserver" "$BIN_DIR/kube-apiserver"
ln -sfn "kubernetes-$KUBERNETES_VERSION/kube-controller-manager" "$BIN_DIR/kube-controller-manager"
ln -sfn "kubernetes-$KUBERNETES_VERSION/kubectl" "$BIN_DIR/kubectl"
ln -sfn "etcd-$ETCD_VERSION/etcd" "$BIN_DIR/etcd"
ln -sfn "helm-$HELM_VERSION/helm" "$BIN_DIR/helm"
ln -sfn "promtool-$PROMETHEUS_MODULE_VERSION/promtool" "$BIN_DIR/promtool"
log "go tools ready in $BIN_DIR"
