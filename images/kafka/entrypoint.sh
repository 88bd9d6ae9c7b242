#!/bin/bash
# Start a Kafka broker configured the way the public apache/kafka image is:
#
#  * Every KAFKA_* environment variable (except the JVM/launcher ones below) becomes a
#    server.properties line: drop KAFKA_, lower-case, then "___" -> "-", "__" -> "_",
#    "_" -> ".". KAFKA_ADVERTISED_LISTENERS -> advertised.listeners.
#  * If there is none, /opt/kafka/config/server.properties (one combined node) is used.
#  * CLUSTER_ID names the KRaft cluster (a fixed default otherwise); storage is formatted
#    on first start and left alone on restarts.
#  * KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS and KAFKA_OPTS reach the JVM.
set -euo pipefail

home=/opt/kafka
defaults=$home/config/server.properties
generated=/tmp/kafka-config/server.properties
not_properties=" KAFKA_VERSION KAFKA_HOME KAFKA_IMAGE_VERSION KAFKA_HEAP_OPTS KAFKA_OPTS \
KAFKA_LOG4J_OPTS KAFKA_JMX_OPTS KAFKA_JVM_PERFORMANCE_OPTS KAFKA_GC_LOG_OPTS \
KAFKA_LOG4J_ROOT_LOGLEVEL KAFKA_LOG4J_LOGGERS KAFKA_TOOLS_LOG4J_LOGLEVEL KAFKA_JMX_HOSTNAME "

property_name() {
  local name=${1#KAFKA_}
  name=${name,,}
  name=${name//___/-}
  name=${name//__/@}   # placeholder: "__" is a literal underscore
  name=${name//_/.}
  printf '%s' "${name//@/_}"
}

render_config() {
  local var lines=()
  while IFS= read -r var; do
    [[ $not_properties == *" $var "* ]] && continue
    lines+=("$(property_name "$var")=${!var}")
  done < <(compgen -e | grep '^KAFKA_' | sort)
  if [ ${#lines[@]} -eq 0 ]; then
    echo "$defaults"
    return
  fi
  mkdir -p "$(dirname "$generated")"
  printf '%s\n' "# Generated from KAFKA_* environment variables by entrypoint.sh" "${lines[@]}" \
    >"$generated"
  echo "$generated"
}

config=$(render_config)
echo "entrypoint: Kafka ${KAFKA_IMAGE_VERSION:-?} with $config:" >&2
grep -v '^#' "$config" | sed 's/^/entrypoint:   /' >&2

java_cmd=(java -cp "$home/libs/*" "-Dlog4j2.configurationFile=$home/config/log4j2.properties")
cluster_id=${CLUSTER_ID:-5L6g3nShT-eMCtK--X86sw}
"${java_cmd[@]}" kafka.tools.StorageTool format --config "$config" \
  --cluster-id "$cluster_id" --ignore-formatted >&2

# shellcheck disable=SC2086  # the *_OPTS variables hold several words on purpose
exec "${java_cmd[@]}" ${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G} \
  ${KAFKA_JVM_PERFORMANCE_OPTS:--server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true} \
  ${KAFKA_OPTS:-} kafka.Kafka "$config"
