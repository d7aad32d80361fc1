# Shared helpers for the hack/ scripts. Source it; it defines paths and logging, nothing runs.
set -euo pipefail
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HACK_DIR/.." && pwd)"
# shellcheck source=versions.env
source "$HACK_DIR/versions.env"
CACHE_DIR="${CONNECT_OFFSETS_CACHE:-$HOME/.cache/connect-offsets}"
BIN_DIR="$CACHE_DIR/bin"
mkdir -p "$BIN_DIR"
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
# Go builds: hermetic, static, cached under the project cache folder.
go_env() {
  export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
  export GOMODCACHE="$CACHE_DIR/go/mod" GOCACHE="$CACHE_DIR/go/build" GOPATH="$CACHE_DIR/go/path"
}
