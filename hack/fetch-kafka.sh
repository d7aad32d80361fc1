#!/usr/bin/env bash
# Resolves Kafka, Connect and MirrorMaker 2 jars from Maven Central into the cache (per version).
# Usage: fetch-kafka.sh [VERSION ...]   (default: KAFKA_VERSION from versions.env). Each version gets
# its own libs dir, so a DedicatedWorker of another Connect version (tests/integration/
# test_connect_versions.py) can start next to the stack's brokers.
source "$(dirname "$0")/lib.sh"
fetch_one() {
  local version="$1" dest="$CACHE_DIR/kafka-$1/libs" compat=()
  # Another version than the stack's is only ever a compat Connect worker (no basic auth, see pom.xml).
  if [[ "$version" != "$KAFKA_VERSION" ]]; then compat=(-Dcompat); fi
  # A pre-3.6 worker only shows the ConnectTooOld condition; no MirrorMaker 2 for it (pom.xml).
  if [[ "$version" == [0-2].* || "$version" == 3.[0-5].* ]]; then compat+=(-Dnomirror); fi
  # A compat worker can use any complete libs dir; the stack's needs the basic-auth extension, which a
  # compat fetch leaves out: a version first fetched as a compat worker (the default moved to it) is
  # fetched again in full.
  if [[ -f "$dest/.complete" ]] && { ((${#compat[@]})) || compgen -G "$dest/connect-basic-auth-extension-*.jar" >/dev/null; }; then
    return 0
  fi
  command -v mvn >/dev/null || die "mvn is not installed (need Maven 3.8+)"
  log "resolving Kafka $version jars from Maven Central"
  rm -rf "$dest"; mkdir -p "$dest"
  mvn -q -B -Dstyle.color=never -f "$HACK_DIR/kafka/pom.xml" \
    -Dmaven.repo.local="$CACHE_DIR/m2" "${compat[@]}" \
    -Dkafka.version="$version" -Dscala.binary.version="$KAFKA_SCALA_VERSION" -Dlog4j.version="$LOG4J_VERSION" -Dslf4j.version="$SLF4J_VERSION" \
    dependency:copy-dependencies -DoutputDirectory="$dest" -DincludeScope=runtime
  touch "$dest/.complete"
  log "kafka jars ready in $dest ($(ls "$dest" | wc -l) jars)"
}
for version in "${@:-$KAFKA_VERSION}"; do fetch_one "$version"; done
