#!/usr/bin/env bash
# Resolves Kafka, Connect and MirrorMaker 2 jars from Maven Central into the cache (per version).
source "$(dirname "$0")/lib.sh"
dest="$CACHE_DIR/kafka-$KAFKA_VERSION/libs"
if [[ -f "$dest/.complete" ]]; then exit 0; fi
command -v mvn >/dev/null || die "mvn is not installed (need Maven 3.8+)"
log "resolving Kafka $KAFKA_VERSION jars from Maven Central"
rm -rf "$dest"; mkdir -p "$dest"
mvn -q -B -Dstyle.color=never -f "$HACK_DIR/kafka/pom.xml" \
  -Dmaven.repo.local="$CACHE_DIR/m2" \
  -Dkafka.version="$KAFKA_VERSION" -Dscala.binary.version="$KAFKA_SCALA_VERSION" -Dlog4j.version="$LOG4J_VERSION" -Dslf4j.version="$SLF4J_VERSION" \
  dependency:copy-dependencies -DoutputDirectory="$dest" -DincludeScope=runtime
touch "$dest/.complete"
log "kafka jars ready in $dest ($(ls "$dest" | wc -l) jars)"
