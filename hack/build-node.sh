#!/usr/bin/env bash
# Builds the binaries of the stack's optional node (python3 hack/stack.py up node), each cached per
# version under $CACHE_DIR/bin and not built again when present:
# - kubelet, kube-scheduler, kube-proxy: k8s.io/kubernetes at KUBERNETES_VERSION (the API server's
#   own version), through a wrapper module as in hack/build-go-tools.sh;
# - the CNI plugins bridge, host-local, loopback, portmap: github.com/containernetworking/plugins at
#   CNI_PLUGINS_VERSION;
# - crictl: sigs.k8s.io/cri-tools at CRI_TOOLS_VERSION;
# - the sandbox image's pause binary (a few lines of Go, below).
# One at a time, at nice 19 (2 cores, shared). Measured on 2026-11-29 with the Go build cache of
# hack/build-go-tools.sh (make deps) in place: kubelet 29 s, kube-scheduler 5 s, kube-proxy 8 s,
# CNI plugins 7 s, crictl 27 s, pause 1 s (about 80 s in all, downloads included).
# containerd, runc and iptables are Debian packages (versions.env pins them, hack/node-packages.sh
# installs them), not built here.
source "$(dirname "$0")/lib.sh"
go_env
command -v go >/dev/null || die "go is not installed (need Go >= 1.25)"

K8S_OUT="$BIN_DIR/kubernetes-$KUBERNETES_VERSION"
CNI_OUT="$BIN_DIR/cni-plugins-$CNI_PLUGINS_VERSION"
NODE_COMMANDS=(kubelet kube-scheduler kube-proxy)
CNI_PLUGINS=(main/bridge main/loopback ipam/host-local meta/portmap)
CRI_TOOLS_OUT="$BIN_DIR/cri-tools-$CRI_TOOLS_VERSION"
PAUSE_OUT="$BIN_DIR/stack-pause-$STACK_PAUSE_VERSION"

build_node_kubernetes() {
  local missing=() cmd
  for cmd in "${NODE_COMMANDS[@]}"; do [[ -x "$K8S_OUT/$cmd" ]] || missing+=("$cmd"); done
  ((${#missing[@]})) || return 0
  local work="$CACHE_DIR/src/kubernetes-node-$KUBERNETES_VERSION"
  mkdir -p "$work" "$K8S_OUT"
  log "building ${missing[*]} v$KUBERNETES_VERSION (nice 19, one at a time)"
  (
    cd "$work"
    if [[ ! -f go.sum ]]; then
      rm -f go.mod
      go mod init local/k8snode >/dev/null 2>&1
      {
        printf '//go:build tools\n\npackage tools\n\nimport (\n'
        for cmd in "${NODE_COMMANDS[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$cmd"; done
        printf ')\n'
      } > tools.go
      # k8s.io/kubernetes pins its staging modules at v0.0.0 with relative replaces: pin each to its
      # published v0.Y.Z (as hack/build-go-tools.sh does for the API server).
      local gomod staging_version="v0.${KUBERNETES_VERSION#1.}" m
      gomod=$(go mod download -json "k8s.io/kubernetes@v$KUBERNETES_VERSION" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
      for m in $(sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*#\1#p' "$gomod"); do
        go mod edit -replace="$m=$m@$staging_version"
      done
      go mod edit -require="k8s.io/kubernetes@v$KUBERNETES_VERSION"
      go mod tidy -e >/dev/null 2>&1 || true
      go mod download
    fi
    local minor="${KUBERNETES_VERSION#1.}" ld="" pkg
    minor="${minor%%.*}"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld+=" -X $pkg.gitVersion=v$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
      ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    done
    for cmd in "${missing[@]}"; do
      local start=$SECONDS
      nice -n 19 go build -trimpath -ldflags "-s -w $ld" -o "$K8S_OUT/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd"
      mv "$K8S_OUT/$cmd.tmp" "$K8S_OUT/$cmd"
      log "built $cmd in $((SECONDS - start)) s"
    done
  )
}

build_cni_plugins() {
  local plugin missing=()
  for plugin in "${CNI_PLUGINS[@]}"; do [[ -x "$CNI_OUT/${plugin#*/}" ]] || missing+=("$plugin"); done
  ((${#missing[@]})) || return 0
  mkdir -p "$CNI_OUT"
  log "building CNI plugins ${missing[*]} v$CNI_PLUGINS_VERSION"
  for plugin in "${missing[@]}"; do
    local start=$SECONDS
    GOBIN="$CNI_OUT" nice -n 19 go install -trimpath \
      -ldflags "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=v$CNI_PLUGINS_VERSION" \
      "github.com/containernetworking/plugins/plugins/$plugin@v$CNI_PLUGINS_VERSION"
    log "built CNI ${plugin#*/} in $((SECONDS - start)) s"
  done
}

# crictl, to look at the node's Pods and containers (docs/development.md#the-node).
build_crictl() {
  [[ -x "$CRI_TOOLS_OUT/crictl" ]] && return 0
  mkdir -p "$CRI_TOOLS_OUT"
  log "building crictl v$CRI_TOOLS_VERSION"
  GOBIN="$CRI_TOOLS_OUT" nice -n 19 go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=v$CRI_TOOLS_VERSION" \
    "sigs.k8s.io/cri-tools/cmd/crictl@v$CRI_TOOLS_VERSION"
}

# The sandbox ("pause") image's one binary: a static program that sleeps until SIGINT/SIGTERM and
# reaps the zombies of a shared PID namespace, as the upstream pause does. No registry serves
# registry.k8s.io/pause here: hack/stack.py packs this binary into an image of one layer and imports
# it into the node's containerd, which uses it as sandbox_image.
build_pause() {
  [[ -x "$PAUSE_OUT/pause" ]] && return 0
  local work="$CACHE_DIR/src/stack-pause-$STACK_PAUSE_VERSION"
  mkdir -p "$work" "$PAUSE_OUT"
  log "building the sandbox image's pause binary"
  (
    cd "$work"
    rm -f go.mod
    go mod init local/pause >/dev/null 2>&1
    cat > main.go <<'GO'
// Command pause holds a Pod's namespaces: it sleeps until SIGINT or SIGTERM and reaps zombies.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
GO
    go build -trimpath -ldflags "-s -w" -o "$PAUSE_OUT/pause" .
  )
}

build_cni_plugins
build_crictl
build_pause
build_node_kubernetes
ln -sfn "cri-tools-$CRI_TOOLS_VERSION/crictl" "$BIN_DIR/crictl"
for cmd in "${NODE_COMMANDS[@]}"; do ln -sfn "kubernetes-$KUBERNETES_VERSION/$cmd" "$BIN_DIR/$cmd"; done
log "node binaries ready: $K8S_OUT (kubelet, kube-scheduler, kube-proxy), $CNI_OUT, $CRI_TOOLS_OUT, $PAUSE_OUT"
