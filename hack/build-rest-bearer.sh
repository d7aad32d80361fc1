#!/usr/bin/env bash
# Builds hack/rest-bearer (a Connect REST extension demanding a bearer token, for
# tests/integration/test_connect_bearer.py) with Maven into the cache, and prints the directory to
# give a worker as plugin.path. Rebuilt only when its sources or versions change (a stamp holds their
# hash); the Maven build directory lives under the cache too, so the repository stays clean.
source "$(dirname "$0")/lib.sh"
SRC="$HACK_DIR/rest-bearer"
OUT="$CACHE_DIR/rest-bearer"
PLUGIN_DIR="$OUT/plugins"
JAR="$PLUGIN_DIR/connect-offsets-rest-bearer.jar"
VERSIONS="$KAFKA_VERSION $JAKARTA_WS_RS_VERSION $MAVEN_COMPILER_PLUGIN_VERSION $MAVEN_RESOURCES_PLUGIN_VERSION $MAVEN_JAR_PLUGIN_VERSION $MAVEN_SUREFIRE_PLUGIN_VERSION"
HASH="$( { echo "$VERSIONS"; cd "$SRC" && find . -type f ! -path './target/*' | LC_ALL=C sort | xargs sha256sum; } | sha256sum | cut -c1-16)"
STAMP="$OUT/.built-$HASH"
if [[ -f "$STAMP" && -f "$JAR" ]]; then echo "$PLUGIN_DIR"; exit 0; fi
command -v mvn >/dev/null || die "mvn is not installed (need Maven 3.8+)"
command -v javac >/dev/null || die "javac is not installed (need JDK 17+)"
log "building the bearer-token REST extension (hack/rest-bearer)"
rm -rf "$OUT"; mkdir -p "$PLUGIN_DIR"
mvn -q -B -Dstyle.color=never -f "$SRC/pom.xml" -Dmaven.repo.local="$CACHE_DIR/m2" \
  -Dbuild.dir="$OUT/target" -Dkafka.version="$KAFKA_VERSION" -Djakarta.ws.rs.version="$JAKARTA_WS_RS_VERSION" \
  -Dmaven.compiler.plugin.version="$MAVEN_COMPILER_PLUGIN_VERSION" \
  -Dmaven.resources.plugin.version="$MAVEN_RESOURCES_PLUGIN_VERSION" \
  -Dmaven.jar.plugin.version="$MAVEN_JAR_PLUGIN_VERSION" \
  -Dmaven.surefire.plugin.version="$MAVEN_SUREFIRE_PLUGIN_VERSION" \
  package >&2
# Only the jar goes on plugin.path: Connect would scan anything else in that folder as well.
cp "$OUT/target/connect-offsets-rest-bearer.jar" "$JAR"
touch "$STAMP"
log "bearer-token REST extension ready in $JAR"
echo "$PLUGIN_DIR"
