#!/usr/bin/env bash
# Resolves Spark's Kafka source jars (for the offsets history pipeline, pyspark extra) from Maven
# Central into the cache, once per version, so no job ever downloads at run time (no spark.jars.packages).
source "$(dirname "$0")/lib.sh"
dest="$CACHE_DIR/spark-$SPARK_VERSION/jars"
if [[ -f "$dest/.complete" ]]; then exit 0; fi
command -v mvn >/dev/null || die "mvn is not installed (need Maven 3.8+)"
log "resolving Spark $SPARK_VERSION Kafka source jars from Maven Central"
rm -rf "$dest"; mkdir -p "$dest"
mvn -q -B -Dstyle.color=never -f "$HACK_DIR/spark/pom.xml" \
  -Dmaven.repo.local="$CACHE_DIR/m2" \
  -Dspark.version="$SPARK_VERSION" -Dscala.binary.version="$KAFKA_SCALA_VERSION" \
  -Dkafka-clients.version="$SPARK_KAFKA_CLIENTS_VERSION" -Dcommons-pool2.version="$SPARK_COMMONS_POOL2_VERSION" \
  dependency:copy-dependencies -DoutputDirectory="$dest" -DincludeScope=runtime
# The pins must be what the connector itself was built against (its POM's compile dependencies).
connector_pom="$CACHE_DIR/m2/org/apache/spark/spark-sql-kafka-0-10_$KAFKA_SCALA_VERSION/$SPARK_VERSION/spark-sql-kafka-0-10_$KAFKA_SCALA_VERSION-$SPARK_VERSION.pom"
for pin in "kafka-clients:$SPARK_KAFKA_CLIENTS_VERSION" "commons-pool2:$SPARK_COMMONS_POOL2_VERSION"; do
  artifact="${pin%%:*}" version="${pin#*:}"
  declared=$(grep -A1 "<artifactId>$artifact</artifactId>" "$connector_pom" | sed -n 's#.*<version>\(.*\)</version>.*#\1#p' | head -1)
  [[ -z "$declared" || "$declared" == "$version" ]] \
    || die "hack/versions.env pins $artifact $version but spark-sql-kafka $SPARK_VERSION declares $declared"
done
touch "$dest/.complete"
log "spark kafka jars ready in $dest ($(ls "$dest" | wc -l) jars)"
