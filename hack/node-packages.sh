#!/usr/bin/env bash
# Installs the Debian packages of the stack's optional node (python3 hack/stack.py up node) at the
# versions hack/versions.env pins: containerd (with its runc shim and ctr), runc and iptables, and
# podman and debootstrap for the operator image its Pods run (make image, hack/build-image.sh). Needs
# root and apt. The package's own /etc/containerd/config.toml and systemd unit are left alone: the
# stack runs its own containerd with its own config, root, state and socket under the stack folder.
#   hack/node-packages.sh          install what is missing or at another version
#   hack/node-packages.sh --check  only say what is missing (exit 1 if anything is)
source "$(dirname "$0")/lib.sh"
wanted=("containerd=$CONTAINERD_DEB_VERSION" "runc=$RUNC_DEB_VERSION" "iptables=$IPTABLES_DEB_VERSION"
  "podman=$PODMAN_DEB_VERSION" "debootstrap=$DEBOOTSTRAP_DEB_VERSION")
missing=()
for spec in "${wanted[@]}"; do
  installed="$(dpkg-query -W -f '${Version}' "${spec%%=*}" 2>/dev/null || true)"
  [[ "$installed" == "${spec#*=}" ]] || missing+=("$spec")
done
((${#missing[@]})) || exit 0
if [[ "${1:-}" == "--check" ]]; then
  echo "node packages missing or at another version: ${missing[*]} (hack/node-packages.sh installs them)" >&2
  exit 1
fi
[[ "$(id -u)" == 0 ]] || die "installing ${missing[*]} needs root (apt-get)"
log "apt-get install ${missing[*]}"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
