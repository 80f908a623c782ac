#!/bin/sh
# make-big.sh - generates the kcr-gen test CRD big.yaml (kind Big) and a sample
# that sets every one of its properties.
#
#   sh tests/gen/crds/make-big.sh          > tests/gen/crds/big.yaml
#   sh tests/gen/crds/make-big.sh sample   > tests/gen/samples/big-2.json
#   sh tests/gen/crds/make-big.sh count    # prints the number of leaf properties
#
# Both committed outputs are this script's output byte for byte
# (tests/gen/verify.sh checks that). POSIX sh + POSIX awk only (tested with
# mawk and gawk); no randomness, no dates: the "generated" fields come from a
# fixed linear congruential sequence.
#
# The schema is described below in a small indentation language (2 spaces per
# level), one property per line:
#
#   NAME TYPE [FLAG...]
#
# TYPE is string, int32, int64, number, boolean, intstr (int-or-string),
# quantity (resource.Quantity), duration (Prometheus duration string), time
# (format date-time), object (children on the following, deeper lines), or
# @TEMPLATE (an object whose properties are those of "@define TEMPLATE" plus
# any children given). Wrappers: []T is an array of T, map[T] an object whose
# additionalProperties are T; they nest (map[[]@x]).
# FLAGs: req (listed in the parent's required), default=YAML, enum=a,b,c,
# min=N, max=N, minlen=N, maxlen=N, pattern=RE, sample=VALUE (the value the
# sample uses; needed with pattern), atomic / granular (x-kubernetes-map-type),
# set / listatomic / listmap=k1,k2 (x-kubernetes-list-type),
# gen=N:SEED (add N generated optional scalar properties), nodesc.
# A line ": text" sets (or, repeated, extends) the previous property's
# description; without one a description is made up from the names.
# The emitter sorts every key (controller-gen's layout).
set -eu
LC_ALL=C
export LC_ALL
mode=${1:-crd}
case $mode in
crd | sample | count) ;;
*)
  echo "usage: $0 [crd|sample|count]" >&2
  exit 2
  ;;
esac

awk -v mode="$mode" '
function die(m) { print "make-big.sh: line " NR ": " m > "/dev/stderr"; bad = 1; exit 1 }
function newnode(name, base,    id) {
  id = ++NN; NM[id] = name; BASE[id] = base; WR[id] = ""; REF[id] = ""; NCH[id] = 0
  return id
}
function addchild(p, c) { NCH[p]++; CH[p, NCH[p]] = c; PAR[c] = p }
function setflags(id, s,    a, n, i, f, p, k) {
  n = split(s, a, " ")
  for (i = 1; i <= n; i++) {
    f = a[i]; p = index(f, "=")
    if (p) { k = substr(f, 1, p - 1); FV[id, k] = substr(f, p + 1) } else k = f
    FL[id, k] = 1
  }
}
function settype(id, t) {
  while (1) {
    if (substr(t, 1, 2) == "[]") { WR[id] = WR[id] "a"; t = substr(t, 3) }
    else if (substr(t, 1, 4) == "map[") { WR[id] = WR[id] "m"; t = substr(t, 5, length(t) - 5) }
    else break
  }
  if (substr(t, 1, 1) == "@") { REF[id] = substr(t, 2); t = "object" }
  if (t !~ /^(string|int32|int64|number|boolean|intstr|quantity|duration|time|object)$/) die("bad type " t)
  BASE[id] = t
}
function haschild(p, nm,    i) {
  for (i = 1; i <= NCH[p]; i++) if (NM[CH[p, i]] == nm) return 1
  return 0
}
function lcg() { SEED = (SEED * 75 + 74) % 65537; return SEED }
function gen(p, spec,    a, n, k, pi, si, nm, c) {
  split(spec, a, ":"); n = a[1] + 0; SEED = a[2] + 0
  for (k = 0; k < n; ) {
    pi = lcg() % NPRE + 1; si = lcg() % NSUF + 1
    nm = PRE[pi] SUFN[si]
    if (haschild(p, nm)) continue
    c = newnode(nm, "")
    settype(c, SUFT[si]); setflags(c, SUFF[si])
    addchild(p, c); k++
  }
}
BEGIN {
  NN = 0; ROOT = newnode("", "object"); STK[0] = ROOT; LAST = 0
  NPRE = split("scrape query remote rule alert sample series label target shard " \
    "retention compaction wal head block chunk exemplar trace log web " \
    "api cache index lookback eval notify federate ingest replica outage", PRE, " ")
  NSUF = 0
  s = "Interval duration|Timeout duration|Window duration|Limit int64|MaxBytes int64|" \
    "Offset int64|Seed int64|Count int32|Retries int32 min=0|Port int32 min=1 max=65535|" \
    "Priority int32 min=-1000 max=1000|Concurrency int32 min=1|Enabled boolean|Disabled boolean|" \
    "Strict boolean|Name string|Path string|Prefix string|Url string|Label string|" \
    "Ratio number min=0 max=1|Factor number|Threshold number|Jitter number min=0|Size quantity|" \
    "Budget intstr|Mode string enum=Fast,Safe,Off|Policy string enum=Allow,Deny,Audit|" \
    "Since time|Selectors []string set|Tags map[string]"
  NSUF = split(s, tmp, "|")
  for (i = 1; i <= NSUF; i++) {
    n = split(tmp[i], w, " ")
    SUFN[i] = w[1]; SUFT[i] = w[2]; SUFF[i] = ""
    for (j = 3; j <= n; j++) SUFF[i] = SUFF[i] (j > 3 ? " " : "") w[j]
  }
}
/^[ ]*$/ || /^[ ]*#/ { next }
/^@define / {
  t = newnode($2, "object"); TPL[$2] = t; STK[0] = t
  for (i = 3; i <= NF; i++) setflags(t, $i)
  next
}
/^@end/ { STK[0] = ROOT; next }
{
  match($0, /^ */); ind = RLENGTH / 2
  if ($1 == ":") {
    line = $0; sub(/^ *: ?/, "", line)
    if (LAST in DESC) line = DESC[LAST] "\n" line
    DESC[LAST] = line
    next
  }
  if (!((ind) in STK) || STK[ind] == "") die("bad indentation")
  id = newnode($1, ""); settype(id, $2)
  fl = ""; for (i = 3; i <= NF; i++) fl = fl (i > 3 ? " " : "") $i
  setflags(id, fl)
  addchild(STK[ind], id); STK[ind + 1] = id; for (k = ind + 2; k in STK; k++) delete STK[k]
  LAST = id
  if ((id, "gen") in FL) gen(id, FV[id, "gen"])
}

# ---- helpers over the tree ----------------------------------------------------
function sp(n,    s) { s = ""; while (n-- > 0) s = s " "; return s }
# kids(id): sorted children (template ones + own) in SK[id, 1..NSK[id]]
function kids(id,    n, i, j, t, c, tid) {
  if (id in NSK) return NSK[id]
  n = 0
  if (REF[id] != "") {
    if (!(REF[id] in TPL)) die("no template " REF[id])
    tid = TPL[REF[id]]
    for (i = 1; i <= NCH[tid]; i++) { n++; SK[id, n] = CH[tid, i] }
  }
  for (i = 1; i <= NCH[id]; i++) { n++; SK[id, n] = CH[id, i] }
  for (i = 2; i <= n; i++) {
    c = SK[id, i]
    for (j = i - 1; j >= 1 && NM[SK[id, j]] > NM[c]; j--) SK[id, j + 1] = SK[id, j]
    SK[id, j + 1] = c
  }
  for (i = 2; i <= n; i++) if (NM[SK[id, i]] == NM[SK[id, i - 1]]) die("duplicate property " NM[SK[id, i]])
  NSK[id] = n
  return n
}
function hasfl(id, k) { return ((id, k) in FL) || (REF[id] != "" && ((TPL[REF[id]], k) in FL)) }
function leaves(id,    n, i, s) {
  if (BASE[id] != "object") return 1
  n = kids(id); s = 0
  for (i = 1; i <= n; i++) s += leaves(SK[id, i])
  return s
}
function words(nm,    i, c, s) {
  s = ""
  for (i = 1; i <= length(nm); i++) {
    c = substr(nm, i, 1)
    if (c ~ /[A-Z]/ && i > 1) s = s " "
    if (c == "_") c = " "
    s = s tolower(c)
  }
  return s
}
function yq(s) {
  if (s == "" || s ~ /^(true|false|True|False|TRUE|FALSE|yes|no|Yes|No|YES|NO|on|off|On|Off|ON|OFF|y|n|Y|N|null|Null|NULL|~)$/ || s ~ /^[-+.0-9]/ || s ~ /^[]\[{}#&*!|>%@`"'"'"',?:]/ || s ~ /: / || s ~ / #/)
    return "\"" s "\""
  return s
}

# ---- YAML ------------------------------------------------------------------------
function desc(id, ind, level,    d, n, a, i, pw) {
  if (level > 1 || hasfl(id, "nodesc")) return
  if (id in DESC) d = DESC[id]
  else {
    pw = (PAR[id] == ROOT) ? "object" : words(NM[PAR[id]])
    if (WR[id] ~ /^a/) d = NM[id] " lists the " words(NM[id]) " entries of this " pw "."
    else if (WR[id] ~ /^m/) d = NM[id] " maps names to " words(NM[id]) " values."
    else if (BASE[id] == "object") d = NM[id] " holds the " words(NM[id]) " settings of this " pw "."
    else d = NM[id] " configures the " words(NM[id]) " of this " pw "."
    if (++NDESC % 11 == 0)
      d = d "\nOptional: when unset, the operator picks a default (see \"" NM[id] "\" in the docs)."
  }
  if (index(d, "\n") || d ~ /: / || d ~ / #/ || d ~ /^[^a-zA-Z]/) {
    print ind "description: |-"
    n = split(d, a, "\n")
    for (i = 1; i <= n; i++) print (a[i] == "" ? "" : ind "  " a[i])
  } else print ind "description: " d
}
# emit(id, ind, level): the schema of property id at wrapper level "level"
function emit(id, ind, level,    w, n, i, a) {
  w = substr(WR[id], level, 1)
  if (w == "a") {
    desc(id, ind, level)
    print ind "items:"
    emit(id, ind "  ", level + 1)
    if (level == 1 && (id, "maxitems") in FL) print ind "maxItems: " FV[id, "maxitems"]
    print ind "type: array"
    if (level == 1 && (id, "listmap") in FL) {
      print ind "x-kubernetes-list-map-keys:"
      n = split(FV[id, "listmap"], a, ",")
      for (i = 1; i <= n; i++) print ind "- " a[i]
      print ind "x-kubernetes-list-type: map"
    } else if (level == 1 && (id, "set") in FL) print ind "x-kubernetes-list-type: set"
    else if (level == 1 && (id, "listatomic") in FL) print ind "x-kubernetes-list-type: atomic"
    return
  }
  if (w == "m") {
    print ind "additionalProperties:"
    emit(id, ind "  ", level + 1)
    desc(id, ind, level)
    print ind "type: object"
    if (level == 1 && hasfl(id, "granular")) print ind "x-kubernetes-map-type: granular"
    if (level == 1 && hasfl(id, "atomic")) print ind "x-kubernetes-map-type: atomic"
    return
  }
  value(id, ind, level)
}
function value(id, ind, level,    b, n, i, a, c, r) {
  b = BASE[id]
  if (b == "intstr" || b == "quantity") {
    print ind "anyOf:"; print ind "- type: integer"; print ind "- type: string"
  }
  if ((id, "default") in FL) print ind "default: " FV[id, "default"]
  desc(id, ind, level)
  if ((id, "enum") in FL) {
    print ind "enum:"
    n = split(FV[id, "enum"], a, ",")
    for (i = 1; i <= n; i++) print ind "- " yq(a[i])
  }
  if (b == "int32" || b == "int64") print ind "format: " b
  if (b == "time") print ind "format: date-time"
  if ((id, "maxlen") in FL) print ind "maxLength: " FV[id, "maxlen"]
  if ((id, "max") in FL) print ind "maximum: " FV[id, "max"]
  if ((id, "minlen") in FL) print ind "minLength: " FV[id, "minlen"]
  if ((id, "min") in FL) print ind "minimum: " FV[id, "min"]
  if ((id, "pattern") in FL) print ind "pattern: " FV[id, "pattern"]
  if (b == "duration") print ind "pattern: ^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
  if (b == "quantity") print ind "pattern: ^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$"
  if (b == "object") {
    n = kids(id)
    if (n > 0) {
      print ind "properties:"
      for (i = 1; i <= n; i++) { c = SK[id, i]; print ind "  " NM[c] ":"; emit(c, ind "    ", 1) }
      r = 0
      for (i = 1; i <= n; i++) if ((SK[id, i], "req") in FL) {
        if (!r++) print ind "required:"
        print ind "- " NM[SK[id, i]]
      }
    }
    print ind "type: object"
    if (hasfl(id, "granular")) print ind "x-kubernetes-map-type: granular"
    if (hasfl(id, "atomic")) print ind "x-kubernetes-map-type: atomic"
    return
  }
  if (b == "intstr" || b == "quantity") { print ind "x-kubernetes-int-or-string: true"; return }
  if (b == "int32" || b == "int64") print ind "type: integer"
  else if (b == "duration" || b == "time") print ind "type: string"
  else print ind "type: " b
}

# ---- the sample ---------------------------------------------------------------
function pick(list,    a, n) { n = split(list, a, "|"); return a[CNT % n + 1] }
function scalar(id,    b, a, n, lo, hi, v) {
  CNT++
  b = BASE[id]
  if ((id, "sample") in FL) return "\"" FV[id, "sample"] "\""
  if ((id, "pattern") in FL) die("pattern without sample= for " NM[id])
  if ((id, "enum") in FL) { n = split(FV[id, "enum"], a, ","); return "\"" a[CNT % n + 1] "\"" }
  if (b == "boolean") return (CNT % 2) ? "true" : "false"
  if (b == "duration") return "\"" pick("30s|1m|5m30s|1h|2h45m10s|100ms|1d|1w|0") "\""
  if (b == "time") return "\"" pick("2025-03-04T05:06:07Z|2024-02-29T23:59:59.999999Z|2025-12-31T23:59:59+05:30") "\""
  if (b == "quantity") return pick("\"500m\"|\"1Gi\"|\"2\"|\"250Mi\"|\"1.5\"|\"100k\"|4|\"1e3\"|\"0\"")
  if (b == "intstr") return pick(CNT "|\"http-metrics\"|\"25%\"")
  if (b == "int32" || b == "int64") {
    lo = ((id, "min") in FL); hi = ((id, "max") in FL)
    if (lo && hi) return FV[id, "min"] + CNT % (FV[id, "max"] - FV[id, "min"] + 1)
    if (lo) return FV[id, "min"] + CNT
    if (hi) return FV[id, "max"] - CNT
    if (b == "int32") return pick(CNT "|-" CNT "|2147483647|-2147483648|0")
    return pick("9007199254740993|-9007199254740993|9223372036854775807|-9223372036854775808|" CNT "|-" CNT "|0")
  }
  if (b == "number") {
    if ((id, "min") in FL) return ((id, "max") in FL) ? "0.25" : "1.5e-7"
    return pick("0.5|-1.25|1e3|1.5e-7|3|-0.0|123456.789|-2.5E+10")
  }
  # string
  v = NM[id] "-" CNT
  if (!((id, "minlen") in FL)) {
    if (CNT % 23 == 0) return "\"\""
    if (CNT % 17 == 0) v = v " tab\\there \\\"q\\\" back\\\\slash caf\\u00e9 \\ud83d\\ude00"
  }
  return "\"" v "\""
}
# jv(id, ind, level): JSON value of property id at wrapper level "level"
function jv(id, ind, level,    w, n, i, s, c) {
  w = substr(WR[id], level, 1)
  if (w == "a") {
    n = (level == WR_LEN(id) && BASE[id] != "object") ? 2 : 1
    s = "["
    for (i = 1; i <= n; i++) s = s (i > 1 ? "," : "") "\n" ind "  " jv(id, ind "  ", level + 1)
    return s "\n" ind "]"
  }
  if (w == "m") {
    if (level == WR_LEN(id) && BASE[id] != "object")
      return "{\n" ind "  \"example.com/first\": " jv(id, ind "  ", level + 1) ",\n" ind "  \"second\": " jv(id, ind "  ", level + 1) "\n" ind "}"
    return "{\n" ind "  \"main\": " jv(id, ind "  ", level + 1) "\n" ind "}"
  }
  if (BASE[id] != "object") return scalar(id)
  n = kids(id)
  if (n == 0) return "{}"
  s = "{"
  for (i = 1; i <= n; i++) {
    c = SK[id, i]
    s = s (i > 1 ? "," : "") "\n" ind "  \"" NM[c] "\": " jv(c, ind "  ", 1)
  }
  return s "\n" ind "}"
}
function WR_LEN(id) { return length(WR[id]) }
function child(p, nm,    n, i) {
  n = kids(p)
  for (i = 1; i <= n; i++) if (NM[SK[p, i]] == nm) return SK[p, i]
  die("no property " nm)
}

END {
  if (bad) exit 1
  total = leaves(ROOT)
  if (mode == "count") { print total; exit 0 }
  if (mode == "sample") {
    print "{"
    print "  \"apiVersion\": \"gen.kcr.test/v1\","
    print "  \"kind\": \"Big\","
    print "  \"metadata\": {"
    print "    \"name\": \"big-2\""
    print "  },"
    print "  \"spec\": " jv(child(ROOT, "spec"), "  ", 1) ","
    print "  \"status\": " jv(child(ROOT, "status"), "  ", 1)
    print "}"
    exit 0
  }
  print "# Big: a generated CRD of the size and shape of prometheus-operator'"'"'s main kind"
  print "# (monitoring.coreos.com Prometheus): " total " leaf properties (scalar, int-or-string,"
  print "# or array/map of scalars), containers/initContainers with the core/v1 Container"
  print "# shape (probes, lifecycle handlers, env valueFrom, security context),"
  print "# affinity, remote write/read endpoints with TLS/OAuth2/SigV4 settings,"
  print "# relabel configs, storage claim templates, and generated tuning sections"
  print "# of optional scalars of every type (string, int32, int64, number, boolean,"
  print "# duration/quantity patterns, int-or-string, date-time, enums)."
  print "# Hard features: sheer size (many structs and decoders), templates reused at"
  print "# many paths, nesting through arrays of objects and maps of arrays, list-map"
  print "# keys with a defaulted member, atomic/granular map types, long enums,"
  print "# multi-line descriptions."
  print "#"
  print "# GENERATED by tests/gen/crds/make-big.sh - do not edit; run"
  print "#   sh tests/gen/crds/make-big.sh > tests/gen/crds/big.yaml"
  print "---"
  print "apiVersion: apiextensions.k8s.io/v1"
  print "kind: CustomResourceDefinition"
  print "metadata:"
  print "  name: bigs.gen.kcr.test"
  print "spec:"
  print "  group: gen.kcr.test"
  print "  names:"
  print "    kind: Big"
  print "    listKind: BigList"
  print "    plural: bigs"
  print "    singular: big"
  print "  scope: Namespaced"
  print "  versions:"
  print "  - name: v1"
  print "    schema:"
  print "      openAPIV3Schema:"
  DESC[ROOT] = "Big is a generated kind with the size and shape of a monitoring operator'"'"'s\nmain custom resource (prometheus-operator'"'"'s Prometheus)."
  value(ROOT, sp(8), 1)
  print "    served: true"
  print "    storage: true"
  print "    subresources:"
  print "      status: {}"
}
' <<'EOF'
apiVersion string
: APIVersion defines the versioned schema of this representation of an object.
: Servers should convert recognized schemas to the latest internal value, and
: may reject unrecognized values.
: More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources
kind string
: Kind is a string value representing the REST resource this object represents.
: Servers may infer this from the endpoint the client submits requests to.
: Cannot be updated.
: In CamelCase.
: More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds
metadata object nodesc
spec object req
: BigSpec is the desired state: a Prometheus-like server deployment.
  additionalArgs []object listatomic
    name string req minlen=1
    value string
  additionalScrapeConfigs @secretKeySelector
  affinity @affinity
  alerting object
    alertmanagers []object req listatomic
      alertRelabelings []@relabelConfig listatomic
      apiVersion string enum=v1,V1,v2,V2
      authorization @authorization
      basicAuth @basicAuth
      bearerTokenFile string
      enableHttp2 boolean
      name string req
      namespace string minlen=1
      pathPrefix string
      port intstr req
      relabelings []@relabelConfig listatomic
      scheme string
      sigv4 @sigv4
      timeout duration
      tlsConfig @tlsConfig
  baseImage string
  configMaps []string listatomic
  containers []@container listmap=name
  disableCompaction boolean
  enableAdminAPI boolean
  enableFeatures []string set
  enforcedBodySizeLimit string pattern=(^0|([0-9]*[.])?[0-9]+((K|M|G|T|E|P)i?)?B)$ sample=512MB
  enforcedKeepDroppedTargets int64
  enforcedLabelLimit int64
  enforcedLabelNameLengthLimit int64
  enforcedLabelValueLengthLimit int64
  enforcedNamespaceLabel string
  enforcedSampleLimit int64
  enforcedTargetLimit int64
  evaluationInterval duration default=30s
  externalLabels map[string]
  externalUrl string
  hostNetwork boolean
  ignoreNamespaceSelectors boolean
  image string
  imagePullPolicy string enum=Always,Never,IfNotPresent
  imagePullSecrets []object listatomic
    name string default=""
  initContainers []@container listmap=name
  listenLocal boolean
  logFormat string enum=logfmt,json
  logLevel string enum=debug,info,warn,error
  maximumStartupDurationSeconds int32 min=60
  minReadySeconds int32 min=0
  nodeSelector map[string]
  paused boolean
  podMetadata @embeddedMeta
  portName string default=web
  priorityClassName string
  queryLogFile string
  remoteRead []object listatomic
    authorization @authorization
    basicAuth @basicAuth
    bearerTokenFile string
    filterExternalLabels boolean
    followRedirects boolean
    headers map[string]
    name string
    noProxy string
    oauth2 @oauth2
    proxyConnectHeader map[[]@secretKeySelector] atomic
    proxyFromEnvironment boolean
    proxyUrl string pattern=^(http|https|socks5)://.+$ sample=http://proxy.example:3128
    readRecent boolean
    remoteTimeout duration
    requiredMatchers map[string]
    tlsConfig @tlsConfig
    url string req
  remoteWrite []object listatomic
    authorization @authorization
    azureAd object
      cloud string enum=AzureChina,AzureGovernment,AzurePublic
      managedIdentity object
        clientId string req
      oauth object
        clientId string req minlen=1
        clientSecret @secretKeySelector req
        tenantId string req minlen=1 pattern=^[-.0-9a-zA-Z]+$ sample=tenant-1.example
      sdk object
        tenantId string pattern=^[-.0-9a-zA-Z]+$ sample=tenant-2
    basicAuth @basicAuth
    bearerTokenFile string
    enableHTTP2 boolean
    followRedirects boolean
    headers map[string]
    messageVersion string enum=V1.0,V2.0
    metadataConfig object
      maxSamplesPerSend int32 min=-1
      send boolean
      sendInterval duration
    name string
    noProxy string
    oauth2 @oauth2
    proxyConnectHeader map[[]@secretKeySelector] atomic
    proxyFromEnvironment boolean
    proxyUrl string pattern=^(http|https|socks5)://.+$ sample=socks5://proxy.example:1080
    queueConfig object
      batchSendDeadline duration
      capacity int32
      maxBackoff duration
      maxRetries int32
      maxSamplesPerSend int32
      maxShards int32
      minBackoff duration
      minShards int32
      retryOnRateLimit boolean
      sampleAgeLimit duration
    remoteTimeout duration
    roundRobinDNS boolean
    sendExemplars boolean
    sendNativeHistograms boolean
    sigv4 @sigv4
    tlsConfig @tlsConfig
    url string req minlen=1
    writeRelabelConfigs []@relabelConfig listatomic
  replicaExternalLabelName string
  replicas int32
  retention duration
  retentionSize string pattern=(^0|([0-9]*[.])?[0-9]+((K|M|G|T|E|P)i?)?B)$ sample=1.5TiB
  routePrefix string
  ruleNamespaceSelector @labelSelector
  ruleSelector @labelSelector
  sampleLimit int64
  scrapeClasses []object listmap=name
    attachMetadata object
      node boolean
    default boolean
    metricRelabelings []@relabelConfig listatomic
    name string req minlen=1
    relabelings []@relabelConfig listatomic
    tlsConfig @tlsConfig
    tuning object gen=24:7
  scrapeInterval duration default=30s
  scrapeTimeout duration
  secrets []string listatomic
  securityContext @podSecurityContext
  serviceAccountName string
  shards int32
  storage object
    disableMountSubPath boolean
    emptyDir object
      medium string
      sizeLimit quantity
    ephemeral object
      volumeClaimTemplate object req
        metadata @embeddedMeta
        spec @pvcSpec req
    volumeClaimTemplate object
      apiVersion string
      kind string
      metadata @embeddedMeta
      spec @pvcSpec
      status object
        accessModes []string listatomic
        allocatedResourceStatuses map[string] granular
        allocatedResources map[quantity]
        capacity map[quantity]
        conditions []object listmap=type
          lastProbeTime time
          lastTransitionTime time
          message string
          reason string
          status string req
          type string req
        currentVolumeAttributesClassName string
        phase string
  thanos object
    additionalArgs []object listatomic
      name string req minlen=1
      value string
    blockSize duration default=2h
    getConfigInterval duration
    getConfigTimeout duration
    grpcListenLocal boolean
    grpcServerTlsConfig @tlsConfig
    httpListenLocal boolean
    image string
    listenLocal boolean
    logFormat string enum=logfmt,json
    logLevel string enum=debug,info,warn,error
    minTime string
    objectStorageConfig @secretKeySelector
    readyTimeout duration
    resources @resources
    tracingConfig @secretKeySelector
    version string
    volumeMounts []object listatomic
      mountPath string req
      name string req
      readOnly boolean
      subPath string
  tolerations []object listatomic
    effect string
    key string
    operator string
    tolerationSeconds int64
    value string
  topologySpreadConstraints []object listatomic
    labelSelector @labelSelector
    matchLabelKeys []string listatomic
    maxSkew int32 req
    minDomains int32
    nodeAffinityPolicy string
    nodeTaintsPolicy string
    topologyKey string req
    whenUnsatisfiable string req
  tsdb object
    outOfOrderTimeWindow duration
  tuning object
: tuning holds the server's many optional knobs, grouped by subsystem.
    alerts object gen=80:101
    api object gen=80:102
    blocks object gen=80:103
    cache object gen=80:104
    compaction object gen=80:105
    exemplars object gen=80:106
    federation object gen=80:107
    head object gen=80:108
    ingestion object gen=80:109
    lookback object gen=80:110
    notifier object gen=80:111
    query object gen=80:112
    remote object gen=80:113
    rules object gen=80:114
    scrape object gen=80:115
    tracing object gen=80:116
    wal object gen=80:117
    web object gen=80:118
  version string
  walCompression boolean
  web object
    httpConfig object
      headers object
        contentSecurityPolicy string
        strictTransportSecurity string
        xContentTypeOptions string enum=NoSniff
        xFrameOptions string enum=Deny,SameOrigin
        xXSSProtection string
      http2 boolean
    maxConnections int32 min=0
    pageTitle string
    tlsConfig object
      cert @secretOrConfigMap req
      cipherSuites []string listatomic
      clientAuthType string
      client_ca @secretOrConfigMap
      curvePreferences []string listatomic
      keySecret @secretKeySelector req
      maxVersion string
      minVersion string
      preferServerCipherSuites boolean
status object
: BigStatus is the observed state, written through the status subresource.
  availableReplicas int32 req
  conditions []@condition listmap=type
  observed object gen=120:99
  paused boolean req
  replicas int32 req
  selector string
  shardStatuses []object listmap=shardID
    availableReplicas int32 req
    replicas int32 req
    shardID string req
    unavailableReplicas int32 req
    updatedReplicas int32 req
  shards int32
  unavailableReplicas int32 req
  updatedReplicas int32 req

@define secretKeySelector atomic
key string req
name string default=""
optional boolean
@end

@define configMapKeySelector atomic
key string req
name string default=""
optional boolean
@end

@define secretOrConfigMap
configMap @configMapKeySelector
secret @secretKeySelector
@end

@define safeTLSConfig
ca @secretOrConfigMap
cert @secretOrConfigMap
insecureSkipVerify boolean
keySecret @secretKeySelector
maxVersion string enum=TLS10,TLS11,TLS12,TLS13
minVersion string enum=TLS10,TLS11,TLS12,TLS13
serverName string
@end

@define tlsConfig
ca @secretOrConfigMap
caFile string
cert @secretOrConfigMap
certFile string
insecureSkipVerify boolean
keyFile string
keySecret @secretKeySelector
maxVersion string enum=TLS10,TLS11,TLS12,TLS13
minVersion string enum=TLS10,TLS11,TLS12,TLS13
serverName string
@end

@define basicAuth
password @secretKeySelector
username @secretKeySelector
@end

@define authorization
credentials @secretKeySelector
credentialsFile string
type string
@end

@define sigv4
accessKey @secretKeySelector
profile string
region string
roleArn string
secretKey @secretKeySelector
@end

@define oauth2
clientId @secretOrConfigMap req
clientSecret @secretKeySelector req
endpointParams map[string]
noProxy string
proxyConnectHeader map[[]@secretKeySelector] atomic
proxyFromEnvironment boolean
proxyUrl string pattern=^(http|https|socks5)://.+$ sample=https://proxy.example
scopes []string listatomic
tlsConfig @safeTLSConfig
tokenUrl string req minlen=1
@end

@define relabelConfig
action string default=replace enum=replace,Replace,keep,Keep,drop,Drop,hashmod,HashMod,labelmap,LabelMap,labeldrop,LabelDrop,labelkeep,LabelKeep,lowercase,Lowercase,uppercase,Uppercase,keepequal,KeepEqual,dropequal,DropEqual
modulus int64
regex string
replacement string
separator string
sourceLabels []string listatomic
targetLabel string
@end

@define labelSelector atomic
matchExpressions []object listatomic
  key string req
  operator string req
  values []string listatomic
matchLabels map[string]
@end

@define nodeSelectorTerm atomic
matchExpressions []object listatomic
  key string req
  operator string req enum=In,NotIn,Exists,DoesNotExist,Gt,Lt
  values []string listatomic
matchFields []object listatomic
  key string req
  operator string req enum=In,NotIn,Exists,DoesNotExist,Gt,Lt
  values []string listatomic
@end

@define podAffinityTerm
labelSelector @labelSelector
matchLabelKeys []string listatomic
mismatchLabelKeys []string listatomic
namespaceSelector @labelSelector
namespaces []string listatomic
topologyKey string req
@end

@define podAffinity
preferredDuringSchedulingIgnoredDuringExecution []object listatomic
  podAffinityTerm @podAffinityTerm req
  weight int32 req min=1 max=100
requiredDuringSchedulingIgnoredDuringExecution []@podAffinityTerm listatomic
@end

@define affinity
nodeAffinity object
  preferredDuringSchedulingIgnoredDuringExecution []object listatomic
    preference @nodeSelectorTerm req
    weight int32 req min=1 max=100
  requiredDuringSchedulingIgnoredDuringExecution object atomic
    nodeSelectorTerms []@nodeSelectorTerm req listatomic
podAffinity @podAffinity
podAntiAffinity @podAffinity
@end

@define envVar
name string req
value string
valueFrom object
  configMapKeyRef @configMapKeySelector
  fieldRef object atomic
    apiVersion string
    fieldPath string req
  resourceFieldRef object atomic
    containerName string
    divisor quantity
    resource string req
  secretKeyRef @secretKeySelector
@end

@define httpGet
host string
httpHeaders []object listatomic
  name string req
  value string req
path string
port intstr req
scheme string enum=HTTP,HTTPS
@end

@define probe
exec object
  command []string listatomic
failureThreshold int32
grpc object
  port int32 req
  service string default=""
httpGet @httpGet
initialDelaySeconds int32
periodSeconds int32
successThreshold int32
tcpSocket object
  host string
  port intstr req
terminationGracePeriodSeconds int64
timeoutSeconds int32
@end

@define lifecycleHandler
exec object
  command []string listatomic
httpGet @httpGet
sleep object
  seconds int64 req
tcpSocket object
  host string
  port intstr req
@end

@define seLinuxOptions
level string
role string
type string
user string
@end

@define windowsOptions
gmsaCredentialSpec string
gmsaCredentialSpecName string
hostProcess boolean
runAsUserName string
@end

@define securityContext
allowPrivilegeEscalation boolean
appArmorProfile object
  localhostProfile string
  type string req
capabilities object
  add []string listatomic
  drop []string listatomic
privileged boolean
procMount string
readOnlyRootFilesystem boolean
runAsGroup int64
runAsNonRoot boolean
runAsUser int64
seLinuxOptions @seLinuxOptions
seccompProfile object
  localhostProfile string
  type string req
windowsOptions @windowsOptions
@end

@define podSecurityContext
appArmorProfile object
  localhostProfile string
  type string req
fsGroup int64
fsGroupChangePolicy string
runAsGroup int64
runAsNonRoot boolean
runAsUser int64
seLinuxChangePolicy string
seLinuxOptions @seLinuxOptions
seccompProfile object
  localhostProfile string
  type string req
supplementalGroups []int64 listatomic
supplementalGroupsPolicy string
sysctls []object listatomic
  name string req
  value string req
windowsOptions @windowsOptions
@end

@define resources
claims []object listmap=name
  name string req
  request string
limits map[quantity]
requests map[quantity]
@end

@define container
args []string listatomic
command []string listatomic
env []@envVar listmap=name
envFrom []object listatomic
  configMapRef object atomic
    name string default=""
    optional boolean
  prefix string
  secretRef object atomic
    name string default=""
    optional boolean
image string
imagePullPolicy string enum=Always,IfNotPresent,Never
lifecycle object
  postStart @lifecycleHandler
  preStop @lifecycleHandler
  stopSignal string
livenessProbe @probe
name string req
ports []object listmap=containerPort,protocol
  containerPort int32 req
  hostIP string
  hostPort int32
  name string
  protocol string default=TCP
readinessProbe @probe
resizePolicy []object listatomic
  resourceName string req
  restartPolicy string req
resources @resources
restartPolicy string
securityContext @securityContext
startupProbe @probe
stdin boolean
stdinOnce boolean
terminationMessagePath string
terminationMessagePolicy string
tty boolean
volumeDevices []object listmap=devicePath
  devicePath string req
  name string req
volumeMounts []object listmap=mountPath
  mountPath string req
  mountPropagation string
  name string req
  readOnly boolean
  recursiveReadOnly string
  subPath string
  subPathExpr string
workingDir string
@end

@define embeddedMeta
annotations map[string]
finalizers []string listatomic
labels map[string]
name string
namespace string
@end

@define pvcSpec
accessModes []string listatomic
dataSource object atomic
  apiGroup string
  kind string req
  name string req
dataSourceRef object
  apiGroup string
  kind string req
  name string req
  namespace string
resources object
  limits map[quantity]
  requests map[quantity]
selector @labelSelector
storageClassName string
volumeAttributesClassName string
volumeMode string
volumeName string
@end

@define condition
lastTransitionTime time req
message string req maxlen=32768
observedGeneration int64 min=0
reason string req maxlen=1024 minlen=1 pattern=^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$ sample=AllGood
status string req enum=True,False,Unknown
type string req maxlen=316 pattern=^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$ sample=Available
@end
EOF
