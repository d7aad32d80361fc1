#!/usr/bin/env bash
# Builds the operator image from operator/Dockerfile with podman, with no registry needed (make image).
#
#   hack/build-image.sh                 build; prints the image reference on stdout (log on stderr)
#   hack/build-image.sh --podman-args   print the extra podman arguments this host needs, one a line
#
# The base image: BASE_IMAGE if set (e.g. python:3.11.7-slim-bookworm where a registry is reachable,
# pulled as usual); otherwise a minimal Debian bookworm (debootstrap --variant=minbase, plus python3,
# python3-venv, ca-certificates and the bookworm-updates/-security upgrades) built here, cached as a
# tarball under $CACHE_DIR/image/ keyed by its inputs, and imported as localhost/connect-offsets-base:bookworm.
# Building that base needs root (debootstrap, chroot); the tarball is reused until an input changes.
#
# The image: IMAGE_REPOSITORY (default localhost/connect-offsets-operator), tagged with the version in
# pyproject.toml (= the chart's appVersion, the tag `helm install` pulls by default). pip in the build
# reaches PyPI over the host network; PIP_CERT (a CA bundle, for a TLS-intercepting proxy) is handed
# to it as the build secret pip_cert, never stored in the image.
#
# Installs nothing: a missing tool is reported with the apt-get command that provides it.
# Hosts where podman's defaults cannot start a container (seen here: crun 1.8 refuses hybrid cgroup
# v1/v2 hierarchies; without CAP_SYS_RESOURCE podman's default ulimits of 1048576 cannot be set) are
# detected with a trivial container, and the first working set of extra arguments (--runtime runc,
# --ulimit within the host's limits) is used for the build and printed by --podman-args.
# CONNECT_OFFSETS_PODMAN_ARGS overrides that detection.
source "$(dirname "$0")/lib.sh"

SUITE=bookworm
BASE_PACKAGES=python3,python3-venv,ca-certificates
# Bump when the recipe below changes in a way its inputs do not show (it is part of the cache key).
BASE_RECIPE=1
BASE_REF=localhost/connect-offsets-base:$SUITE
BASE_KEY_LABEL=io.connect-offsets.base-key
IMAGE_REPOSITORY="${IMAGE_REPOSITORY:-localhost/connect-offsets-operator}"
IMAGE_DIR="$CACHE_DIR/image"

need() {  # need <command> <debian package>: report what is missing and how to get it
  command -v "$1" >/dev/null && return 0
  die "$1 is not installed: apt-get install -y $2   (hack/build-image.sh installs nothing itself)"
}

# The Debian mirrors this machine's apt already uses (deb822 .sources or one-line sources.list), so
# the base comes from a mirror known to be reachable. DEBIAN_MIRROR / DEBIAN_SECURITY_MIRROR override.
apt_mirror() {  # apt_mirror <suite>
  python3 - "$1" <<'EOF'
import glob, re, sys
suite = sys.argv[1]
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n\s*\n", open(path).read()):
        fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
        if "deb" in fields.get("Types", "").split() and suite in fields.get("Suites", "").split():
            print(fields["URIs"].split()[0]); sys.exit()
for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        words = re.sub(r"\[[^]]*\]", "", line.split("#")[0]).split()
        if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
            print(words[1]); sys.exit()
EOF
}

build_base() {
  local mirror security arch key tarball root
  mirror="${DEBIAN_MIRROR:-$(apt_mirror "$SUITE")}"; mirror="${mirror:-http://deb.debian.org/debian}"
  security="${DEBIAN_SECURITY_MIRROR:-$(apt_mirror "$SUITE-security")}"; security="${security:-http://deb.debian.org/debian-security}"
  arch="$(dpkg --print-architecture 2>/dev/null || echo amd64)"
  key="$(printf '%s\n' "$BASE_RECIPE" "$SUITE" "$arch" "$BASE_PACKAGES" "$mirror" "$security" | sha256sum | cut -c1-16)"
  tarball="$IMAGE_DIR/base-$SUITE-$arch-$key.tar"
  if [[ "$(podman image inspect --format "{{index .Labels \"$BASE_KEY_LABEL\"}}" "$BASE_REF" 2>/dev/null)" == "$key" ]]; then
    return 0
  fi
  if [[ ! -f "$tarball" ]]; then
    [[ "$(id -u)" == 0 ]] || die "building the base image needs root (debootstrap, chroot): run as root, or set BASE_IMAGE"
    need debootstrap debootstrap
    log "debootstrapping $SUITE ($arch, minbase + $BASE_PACKAGES) from $mirror"
    mkdir -p "$IMAGE_DIR"
    root="$IMAGE_DIR/rootfs-$key"
    rm -rf "$root"
    trap 'rm -rf "$root" "$tarball.tmp"' EXIT
    debootstrap --variant=minbase --arch="$arch" --include="$BASE_PACKAGES" "$SUITE" "$root" "$mirror" >&2
    # Documentation, man pages and translations are left out, now and by any later apt-get install.
    cat >"$root/etc/dpkg/dpkg.cfg.d/01-connect-offsets-nodoc" <<'EOF'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
EOF
    printf 'deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n' \
      "$mirror" "$SUITE" "$mirror" "$SUITE" "$security" "$SUITE" >"$root/etc/apt/sources.list"
    log "applying $SUITE-updates and $SUITE-security"
    chroot "$root" apt-get -q update >&2
    DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get -q -y --no-install-recommends upgrade >&2
    chroot "$root" apt-get clean
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/debconf/*-old "$root"/var/log/*.log \
      "$root"/var/log/apt/* "$root"/etc/hostname "$root"/etc/resolv.conf
    find "$root/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
    rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
    # The container engine provides /dev and /proc.
    tar --numeric-owner -C "$root" --exclude='./dev/*' --exclude='./proc/*' -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$root"
    trap - EXIT
    log "base rootfs cached in $tarball ($(du -h "$tarball" | cut -f1))"
  fi
  log "importing $tarball as $BASE_REF"
  podman import --change "LABEL $BASE_KEY_LABEL=$key" --change 'CMD ["python3"]' \
    "$tarball" "$BASE_REF" >/dev/null
}

# Extra podman arguments this host needs to run a container, as lines.
engine_args() {
  if [[ -n "${CONNECT_OFFSETS_PODMAN_ARGS:-}" ]]; then tr ' ' '\n' <<<"$CONNECT_OFFSETS_PODMAN_ARGS"; return 0; fi
  # nofile at the host's hard limit; nproc low and fixed: podman here ran with a lower nproc limit
  # (32768) than the shell that started it, and a container cannot get more than podman has.
  local nofile limits candidate error="" errors=""
  nofile="$(ulimit -Hn)"
  limits="--ulimit nofile=$nofile:$nofile --ulimit nproc=4096:4096"
  for candidate in "" "--runtime runc" "$limits" "--runtime runc $limits"; do
    # shellcheck disable=SC2086  # word splitting of the candidate is intended
    if error="$(podman run --rm --user 65532:65532 $candidate "$1" true 2>&1)"; then
      [[ -z "$candidate" ]] || tr ' ' '\n' <<<"$candidate"
      return 0
    fi
    errors+="  podman run ${candidate:-(default arguments)}: $error"$'\n'
  done
  printf '%s' "$errors" >&2
  die "podman cannot start a container here (errors above); on hybrid cgroups install runc (apt-get install -y runc)"
}

need podman podman
need python3 python3
BASE="${BASE_IMAGE:-$BASE_REF}"
if [[ "${1:-}" == "--podman-args" ]]; then
  podman image exists "$BASE" || die "no base image $BASE yet: run hack/build-image.sh (make image) first"
  engine_args "$BASE"
  exit 0
fi

started=$SECONDS
if [[ -z "${BASE_IMAGE:-}" ]]; then build_base; fi
ENGINE_ARGS="$(engine_args "$BASE")" || exit 1
mapfile -t ENGINE <<<"$ENGINE_ARGS"
[[ -n "$ENGINE_ARGS" ]] || ENGINE=()
[[ ${#ENGINE[@]} -eq 0 ]] || log "podman's defaults cannot start a container here; using: ${ENGINE[*]}"
VERSION="$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' "$REPO_ROOT/pyproject.toml")"
IMAGE="$IMAGE_REPOSITORY:$VERSION"
SECRET=()
if [[ -n "${PIP_CERT:-}" && -s "${PIP_CERT:-}" ]]; then SECRET=(--secret "id=pip_cert,src=$PIP_CERT"); fi
log "building $IMAGE from operator/Dockerfile (BASE_IMAGE=$BASE)"
podman build "${ENGINE[@]}" --network host "${SECRET[@]}" --build-arg "BASE_IMAGE=$BASE" \
  -t "$IMAGE" -f "$REPO_ROOT/operator/Dockerfile" "$REPO_ROOT" >&2
log "built $IMAGE in $((SECONDS - started)) s ($(podman image inspect --format '{{.Size}}' "$IMAGE" | numfmt --to=si)B)"
echo "$IMAGE"
