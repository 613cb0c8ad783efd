{{/* Names and labels. */}}
{{- define "siglake.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "siglake.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "siglake.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The pods' ServiceAccount: the chart's (serviceAccount.create), one you name, or the namespace's default. */}}
{{- define "siglake.serviceAccountName" -}}
{{- $sa := default dict .Values.serviceAccount -}}
{{- if $sa.create -}}
{{- default (include "siglake.fullname" .) $sa.name -}}
{{- else -}}
{{- default "default" $sa.name -}}
{{- end -}}
{{- end -}}

{{/* Siglake never calls the Kubernetes API: no API token in the pods unless serviceAccount.automountServiceAccountToken says so. */}}
{{- define "siglake.automountToken" -}}
{{- $v := dig "automountServiceAccountToken" false (default dict .Values.serviceAccount) -}}
{{- ternary "true" "false" (eq (toString $v) "true") -}}
{{- end -}}

{{- define "siglake.podIdentity" -}}
serviceAccountName: {{ include "siglake.serviceAccountName" . }}
automountServiceAccountToken: {{ include "siglake.automountToken" . }}
{{- end -}}

{{- define "siglake.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/*
The Siglake settings of the values, as the config file's YAML: only the
sections that are settings (the keys of `siglake config reference`), each
given to the commands that read it (helm-chart.test.ts checks that every
section of the reference is in one of the lists).
*/}}
{{- define "siglake.ingesterConfig" -}}
{{- $cfg := dict -}}
{{- range $k := list "server" "ingester" "redis" "catalog" "warehouse" "compactor" "auth" "log" "tenants" "audit" "retention" -}}
{{- if hasKey $.Values $k -}}{{- $_ := set $cfg $k (get $.Values $k) -}}{{- end -}}
{{- end -}}
{{- include "siglake.tenantsFileInto" (dict "cfg" $cfg "root" $) -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* The chart's own tenants file (values: declaredTenants) as tenants.file. */}}
{{- define "siglake.tenantsFile" -}}/etc/siglake-tenants/tenants.yaml{{- end -}}

{{- define "siglake.tenantsFileInto" -}}
{{- if .root.Values.declaredTenants -}}
{{- $_ := set .cfg "tenants" (merge (dict "file" (include "siglake.tenantsFile" .root)) (default dict (get .cfg "tenants"))) -}}
{{- end -}}
{{- end -}}

{{- define "siglake.queryConfig" -}}
{{- $cfg := dict -}}
{{- range $k := list "query" "catalog" "warehouse" "auth" "log" "tenants" "audit" "retention" -}}
{{- if hasKey $.Values $k -}}{{- $_ := set $cfg $k (get $.Values $k) -}}{{- end -}}
{{- end -}}
{{- /* Of server.*, `siglake query` reads only shutdownTimeoutSecs (how long running queries may finish on SIGTERM). */ -}}
{{- if hasKey (default dict $.Values.server) "shutdownTimeoutSecs" -}}
{{- if not (kindIs "invalid" $.Values.server.shutdownTimeoutSecs) -}}
{{- $_ := set $cfg "server" (dict "shutdownTimeoutSecs" $.Values.server.shutdownTimeoutSecs) -}}
{{- end -}}
{{- end -}}
{{- include "siglake.tenantsFileInto" (dict "cfg" $cfg "root" $) -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
server.shutdownTimeoutSecs as the processes use it: the binary's default (25)
when the value is left out or null. Every grace period is computed from it.
*/}}
{{- define "siglake.shutdownSecs" -}}
{{- $v := dig "shutdownTimeoutSecs" nil (default dict .Values.server) -}}
{{- if kindIs "invalid" $v -}}25{{- else -}}{{- int $v -}}{{- end -}}
{{- end -}}

{{/*
The least grace period the ingester pod needs, exclusive: the graceful stop
(server.shutdownTimeoutSecs) and, with compactor.drainOnShutdown, the drain
after it (pods.ingester.drainGraceSeconds).
*/}}
{{- define "siglake.ingesterMinGrace" -}}
{{- $min := include "siglake.shutdownSecs" . | int -}}
{{- if dig "drainOnShutdown" false (default dict .Values.compactor) -}}
{{- $drain := .Values.pods.ingester.drainGraceSeconds -}}
{{- $min = add $min (ternary 600 (int $drain) (kindIs "invalid" $drain)) -}}
{{- end -}}
{{- $min -}}
{{- end -}}

{{/* The ingester pod's terminationGracePeriodSeconds: the value, or the least it needs + 15. The checks test this one. */}}
{{- define "siglake.ingesterGrace" -}}
{{- $v := .Values.pods.ingester.terminationGracePeriodSeconds -}}
{{- if kindIs "invalid" $v -}}{{- add (include "siglake.ingesterMinGrace" . | int) 15 -}}{{- else -}}{{- int $v -}}{{- end -}}
{{- end -}}

{{/* The query pod's terminationGracePeriodSeconds: the value, or the shutdown timeout + 5. */}}
{{- define "siglake.queryGrace" -}}
{{- $v := .Values.pods.query.terminationGracePeriodSeconds -}}
{{- if kindIs "invalid" $v -}}{{- add (include "siglake.shutdownSecs" . | int) 5 -}}{{- else -}}{{- int $v -}}{{- end -}}
{{- end -}}

{{/*
The query pod's cache emptyDir sizeLimit: query.cacheMaxMib (the binary's
10240 when left out) plus a quarter, at least 1 GiB: files of running queries
stay past the bound until they end, and the kubelet evicts a pod whose
emptyDir outgrows its limit.
*/}}
{{- define "siglake.queryCacheSizeLimit" -}}
{{- $v := dig "cacheMaxMib" nil (default dict .Values.query) -}}
{{- $mib := ternary 10240 (int64 $v) (kindIs "invalid" $v) -}}
{{- printf "%dMi" (add $mib (max (div (add $mib 3) 4) 1024)) -}}
{{- end -}}

{{/* A Kubernetes memory quantity in MiB (Ki, Mi, Gi, Ti, k, M, G, T or bytes). */}}
{{- define "siglake.mib" -}}
{{- $q := toString . -}}
{{- $units := dict "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 -}}
{{- $num := regexFind "^[0-9.]+" $q -}}
{{- $unit := trimPrefix $num $q -}}
{{- if not $num -}}{{- fail (printf "cannot read the memory quantity %q" $q) -}}{{- end -}}
{{- $mult := 1.0 -}}
{{- if $unit -}}
{{- if not (hasKey $units $unit) -}}{{- fail (printf "cannot read the memory quantity %q (unit %q)" $q $unit) -}}{{- end -}}
{{- $mult = get $units $unit -}}
{{- end -}}
{{- divf (mulf (float64 $num) $mult) 1048576.0 -}}
{{- end -}}

{{/* The port of a listen address host:port. */}}
{{- define "siglake.port" -}}
{{- regexFind "[0-9]+$" (toString .) -}}
{{- end -}}

{{/*
Checks that make a wrong combination of values a `helm template` error, not
a pod that crash-loops or is OOM-killed.
*/}}
{{- define "siglake.checks" -}}
{{- $ing := .Values.pods.ingester -}}
{{- $limitMib := int (default 0 .Values.ingester.memBreaker.limitMib) -}}
{{- $memLimit := dig "resources" "limits" "memory" "" $ing -}}
{{- if $memLimit -}}
{{- $containerMib := include "siglake.mib" $memLimit | float64 -}}
{{- if eq $limitMib 0 -}}
{{- fail (printf "ingester.memBreaker.limitMib is 0 (off) while pods.ingester.resources.limits.memory is %s: set the breaker below the container limit so the ingester sheds load (503 + Retry-After) before the OOM killer ends it" $memLimit) -}}
{{- end -}}
{{- if ge (float64 $limitMib) $containerMib -}}
{{- fail (printf "ingester.memBreaker.limitMib (%d MiB) must be below pods.ingester.resources.limits.memory (%s = %.0f MiB): at or above it the OOM killer ends the pod before the breaker sheds load" $limitMib $memLimit $containerMib) -}}
{{- end -}}
{{- end -}}
{{- $memRequest := dig "resources" "requests" "memory" "" $ing -}}
{{- if and $memRequest (gt $limitMib 0) -}}
{{- if lt (include "siglake.mib" $memRequest | float64) (float64 $limitMib) -}}
{{- fail (printf "pods.ingester.resources.requests.memory (%s) is below ingester.memBreaker.limitMib (%d MiB): request at least what the breaker lets the process use" $memRequest $limitMib) -}}
{{- end -}}
{{- end -}}
{{- $shutdown := include "siglake.shutdownSecs" . | int -}}
{{- $grace := include "siglake.ingesterGrace" . | int -}}
{{- $minGrace := include "siglake.ingesterMinGrace" . | int -}}
{{- if le $grace $minGrace -}}
{{- if dig "drainOnShutdown" false (default dict .Values.compactor) -}}
{{- fail (printf "pods.ingester.terminationGracePeriodSeconds (%d) must be above server.shutdownTimeoutSecs (%d) + pods.ingester.drainGraceSeconds (%d) with compactor.drainOnShutdown: at SIGTERM the pod stops gracefully, then lands its whole WAL, and Kubernetes would kill it mid-drain" $grace $shutdown (sub $minGrace $shutdown)) -}}
{{- else -}}
{{- fail (printf "pods.ingester.terminationGracePeriodSeconds (%d) must be above server.shutdownTimeoutSecs (%d): Kubernetes would kill the pod before queued requests are written" $grace $shutdown) -}}
{{- end -}}
{{- end -}}
{{- if .Values.pods.query.enabled -}}
{{- $qgrace := include "siglake.queryGrace" . | int -}}
{{- if le $qgrace $shutdown -}}
{{- fail (printf "pods.query.terminationGracePeriodSeconds (%d) must be above server.shutdownTimeoutSecs (%d): Kubernetes would kill the query server before running queries finish" $qgrace $shutdown) -}}
{{- end -}}
{{- end -}}
{{- $shared := or (gt (int $ing.replicas) 1) .Values.pods.query.enabled -}}
{{- if and $shared (hasPrefix "sqlite:" (toString .Values.catalog.url)) -}}
{{- fail "catalog.url is SQLite on one pod's volume, but several ingesters (pods.ingester.replicas > 1) or the query server (pods.query.enabled) need a shared catalog: set catalog.url to postgres://… (or SIGLAKE_CATALOG_URL from a Secret through extraEnv, with catalog.url set to the same host without the password)" -}}
{{- end -}}
{{- if and $shared (not (hasPrefix "s3://" (toString .Values.warehouse.path))) -}}
{{- fail "warehouse.path is a directory on one pod's volume, but several ingesters (pods.ingester.replicas > 1) or the query server (pods.query.enabled) need a shared warehouse: set warehouse.path to s3://bucket/prefix" -}}
{{- end -}}
{{- $tenantsFile := dig "file" "" (default dict .Values.tenants) -}}
{{- if and .Values.declaredTenants $tenantsFile -}}
{{- fail "set declaredTenants (the chart mounts them) or tenants.file (a file you mount), not both" -}}
{{- end -}}
{{- if $tenantsFile -}}
{{- range $pod := list "ingester" "query" -}}
{{- $p := get $.Values.pods $pod -}}
{{- if or (eq $pod "ingester") $p.enabled -}}
{{- $mounted := false -}}
{{- range $m := (default list $p.extraVolumeMounts) -}}
{{- $at := trimSuffix "/" $m.mountPath -}}
{{- if or (eq $at $tenantsFile) (hasPrefix (printf "%s/" $at) $tenantsFile) -}}{{- $mounted = true -}}{{- end -}}
{{- end -}}
{{- if not $mounted -}}
{{- fail (printf "tenants.file %s is under no mountPath of pods.%s.extraVolumeMounts: the pod could not read it and would exit 2 at start; mount it there (a ConfigMap or Secret volume), or list the tenants in declaredTenants and let the chart mount them" $tenantsFile $pod) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $auditFile := dig "file" "" (default dict .Values.audit) -}}
{{- if and $auditFile (ne $auditFile "-") -}}
{{- /* The query server opens it too (its index changes are audited, with or without a tenants file). */ -}}
{{- $pods := list "ingester" -}}
{{- if .Values.pods.query.enabled -}}{{- $pods = append $pods "query" -}}{{- end -}}
{{- range $pod := $pods -}}
{{- $p := get $.Values.pods $pod -}}
{{- $writable := or (hasPrefix "/var/lib/siglake/" $auditFile) (hasPrefix "/tmp/" $auditFile) -}}
{{- range $m := (default list $p.extraVolumeMounts) -}}
{{- if and (not $m.readOnly) (hasPrefix (printf "%s/" (trimSuffix "/" $m.mountPath)) $auditFile) -}}{{- $writable = true -}}{{- end -}}
{{- end -}}
{{- if not $writable -}}
{{- fail (printf "audit.file %s is on the %s pods' read-only root file system: use - (stdout), a path under /var/lib/siglake/ (the pod's volume), or a writable pods.%s.extraVolumeMounts" $auditFile $pod $pod) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (hasKey .Values.ingester "tenantClaim") .Values.ingester.tenantClaim (not (dig "oidc" "issuer" "" (default dict .Values.auth))) -}}
{{- fail "ingester.tenantClaim needs auth.oidc.issuer (the claim is read from a verified JWT)" -}}
{{- end -}}
{{- end -}}

{{/*
The image sets SIGLAKE_WAL_DIR, SIGLAKE_CATALOG_URL, SIGLAKE_WAREHOUSE
(issue 19) and SIGLAKE_QUERY_CACHE_DIR, and an env var wins over the config file: so the pods set them
to the values' settings. The catalog URL comes from the chart's Secret, or
from pods.catalogUrlSecret (a URL with its password, kept out of the values).
*/}}
{{- define "siglake.imageEnv" -}}
{{- if .walDir }}
- name: SIGLAKE_WAL_DIR
  value: {{ .walDir | quote }}
{{- end }}
- name: SIGLAKE_CATALOG_URL
  valueFrom:
    secretKeyRef:
      {{- with .root.Values.pods.catalogUrlSecret }}
      name: {{ .name }}
      key: {{ .key }}
      {{- else }}
      name: {{ .secret }}
      key: catalog-url
      {{- end }}
- name: SIGLAKE_WAREHOUSE
  value: {{ .root.Values.warehouse.path | quote }}
{{- with .root.Values.query.cacheDir }}
- name: SIGLAKE_QUERY_CACHE_DIR
  value: {{ . | quote }}
{{- end }}
{{- end -}}

{{- define "siglake.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- define "siglake.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}
