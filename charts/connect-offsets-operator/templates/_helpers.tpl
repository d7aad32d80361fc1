{{/*
Chart name, overridable with nameOverride.
*/}}
{{- define "connect-offsets-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified name of the release's resources (63 characters at most, the DNS label limit).
When the release name already contains the chart name, it is used as it is.
*/}}
{{- define "connect-offsets-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "connect-offsets-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Standard labels of every object of the release.
*/}}
{{- define "connect-offsets-operator.labels" -}}
helm.sh/chart: {{ include "connect-offsets-operator.chart" . }}
{{ include "connect-offsets-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: connect-offsets-operator
{{- end }}

{{/*
Selector labels (stable across upgrades: never add version-dependent labels here).
*/}}
{{- define "connect-offsets-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "connect-offsets-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Name of the ServiceAccount the operator runs as.
*/}}
{{- define "connect-offsets-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "connect-offsets-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Name of the metrics Service: <fullname>-metrics, within 63 characters.
*/}}
{{- define "connect-offsets-operator.metricsServiceName" -}}
{{- printf "%s-metrics" (include "connect-offsets-operator.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{/*
The operator image, tag defaulting to the chart's appVersion.
*/}}
{{- define "connect-offsets-operator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
Prefix of the operator's Lease names (`--lease-prefix`): leaderElection.leasePrefix, else the
release's full name, so two releases in one namespace never share (or fight over) a Lease.
*/}}
{{- define "connect-offsets-operator.leasePrefix" -}}
{{- default (include "connect-offsets-operator.fullname" .) .Values.leaderElection.leasePrefix }}
{{- end }}

{{/*
Namespaced rules of the operator: in a ClusterRole when watching all namespaces, in one Role
per watched namespace otherwise. Each rule says why it is needed.
*/}}
{{- define "connect-offsets-operator.namespacedRules" -}}
# The operator's own resources: kopf lists and watches them; the operator patches/updates them to
# add and remove its finalizer (connect-offsets.io/finalizer, and to migrate the per-shard
# finalizers of older versions) and its annotations (progress, last-handled configuration, and the
# connector-offsets/restart annotations it removes when done). No create/delete: users own them.
- apiGroups: ["connect-offsets.io"]
  resources: ["connectclusters", "kafkaconnectors", "kafkamirrormaker2s"]
  verbs: ["get", "list", "watch", "patch", "update"]
# Their status subresource: conditions, Connect's status, offsets operation results.
- apiGroups: ["connect-offsets.io"]
  resources: ["connectclusters/status", "kafkaconnectors/status", "kafkamirrormaker2s/status"]
  verbs: ["get", "patch", "update"]
# ConfigMaps: `list` writes offsets.json into spec.listOffsets.toConfigMap (created if missing,
# then patched/updated); `alter` reads spec.alterOffsets.fromConfigMap; the operator watches the
# ConfigMaps its resources reference to retry when they change. `delete` is for what the operator
# itself created: backups beyond the retention (CONNECT_OFFSETS_BACKUP_RETENTION) and the stale
# shard ConfigMaps of a large document written again; both are found by the operator's own labels.
# RBAC cannot scope a verb by label, so this is the narrowest rule that lets retention work
# (without it every connector's 6th change left one backup too many, and shards leaked).
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
# Secrets: get only, by name, for ConnectCluster credentials/TLS material and KafkaMirrorMaker2
# secretConfig. No list/watch: the operator never enumerates Secrets.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
# Events about the resources (offsets operations, refusals, restarts): create, and patch to
# aggregate repeated Events.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
# The same through the events.k8s.io API, which newer clients use.
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/*
kopf's resource scanning: it lists and watches CRDs to notice when its resources are (un)installed.
*/}}
{{- define "connect-offsets-operator.crdScanningRule" -}}
# kopf's resource scanning: it lists and watches CRDs to notice its resources being (un)installed.
# Read-only; names and schemas of CRDs only.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["list", "watch"]
{{- end }}

{{/*
The shard label of a sharded install's pods: the shard (0 .. sharding.shards - 1) the pod serves.
Each shard is its own StatefulSet, so its PodDisruptionBudget, anti-affinity and topology spread
select the pods of that shard alone.
*/}}
{{- define "connect-offsets-operator.shardLabel" -}}
connect-offsets.io/shard
{{- end }}

{{/*
Name of shard i's StatefulSet and PodDisruptionBudget: <fullname>-shard-<i>, at most 52 characters
(a StatefulSet's name, with the controller-revision-hash suffix, must stay a 63-character label).
Called with (dict "root" $ "shard" i).
*/}}
{{- define "connect-offsets-operator.shardName" -}}
{{- printf "%s-shard-%d" (include "connect-offsets-operator.fullname" .root | trunc 43 | trimSuffix "-") (int .shard) }}
{{- end }}

{{/*
Selector labels of one workload's pods: the release's, plus the shard's in a sharded install
(shard < 0: unsharded). Called with (dict "root" $ "shard" i).
*/}}
{{- define "connect-offsets-operator.workloadSelectorLabels" -}}
{{ include "connect-offsets-operator.selectorLabels" .root }}
{{- if ge (int .shard) 0 }}
{{ include "connect-offsets-operator.shardLabel" .root }}: {{ .shard | toString | quote }}
{{- end }}
{{- end }}

{{/*
The pod's affinity: `affinity` as given, plus the chart's preferred pod anti-affinity over nodes
(spread.acrossNodes) unless `affinity.podAntiAffinity` is set. Pods of one shard (weight 100) are
kept apart before any two pods of the release (weight 50). Called with (dict "root" $ "shard" i).
*/}}
{{- define "connect-offsets-operator.affinity" -}}
{{- $values := .root.Values }}
{{- $affinity := deepCopy ($values.affinity | default dict) }}
{{- if and $values.spread.acrossNodes (not (hasKey $affinity "podAntiAffinity")) }}
{{- $terms := list }}
{{- if ge (int .shard) 0 }}
{{- $terms = append $terms (dict "weight" 100 "podAffinityTerm" (dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (include "connect-offsets-operator.workloadSelectorLabels" . | fromYaml)))) }}
{{- $terms = append $terms (dict "weight" 50 "podAffinityTerm" (dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (include "connect-offsets-operator.selectorLabels" .root | fromYaml)))) }}
{{- else }}
{{- $terms = append $terms (dict "weight" 100 "podAffinityTerm" (dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (include "connect-offsets-operator.selectorLabels" .root | fromYaml)))) }}
{{- end }}
{{- $_ := set $affinity "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" $terms) }}
{{- end }}
{{- with $affinity }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/*
The pod's topology spread constraints: `topologySpreadConstraints` when given (they replace the
chart's), else the chart's soft spread of the workload's pods (one shard's, in a sharded install)
over zones (spread.acrossZones); nodes without the zone label do not count. Called with
(dict "root" $ "shard" i).
*/}}
{{- define "connect-offsets-operator.topologySpreadConstraints" -}}
{{- $values := .root.Values }}
{{- if $values.topologySpreadConstraints }}
{{- toYaml $values.topologySpreadConstraints }}
{{- else if $values.spread.acrossZones }}
- maxSkew: 1
  topologyKey: topology.kubernetes.io/zone
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "connect-offsets-operator.workloadSelectorLabels" . | nindent 6 }}
{{- end }}
{{- end }}

{{/*
An int-or-percent value of a PodDisruptionBudget: a percentage stays a string ("50%"), a number
(an int with --set, a float64 from a values file) becomes an integer.
*/}}
{{- define "connect-offsets-operator.intOrPercent" -}}
{{- if kindIs "string" . }}{{ . | quote }}{{ else }}{{ int . }}{{ end }}
{{- end }}
