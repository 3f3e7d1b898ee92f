#!/usr/bin/env bash
# Scale reproducers of issue 21, run through the CLI: prints wall time, CPU time and peak
# memory of each, and the ratios the issue asks about. Not part of CI (it takes minutes);
# run it on a quiet machine and quote the figures of one run.
#
#   bash bench/robustness.sh [path/to/placer]   (default: target/release/placer, built if missing)
#
# Cases: a Job gang of 10,000 and 20,000 pods (the 20,000 one must finish in under 30 s and
# within 3x the 10,000 one), the same gangs submitted directly, an Indexed Job of 100,000 pods
# (the API's parallelism cap), a 9,000-pod gang written out pod by pod (about 1.5 MB, more YAML
# nodes than serde-saphyr's default budget), a `* * * * *` CronJob over 10 h and 20 h of
# virtual time (memory bounded by its history limits), and `placer validate /dev/zero`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PLACER="${1:-target/release/placer}"
if [ ! -x "$PLACER" ]; then
    cargo build --release -p placer
fi
TIME=/usr/bin/time
if [ ! -x "$TIME" ]; then
    echo "needs GNU time at /usr/bin/time (Debian package 'time')" >&2
    exit 2
fi
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT

# Nodes of 64 cpu, 110 pods, in racks of 50.
nodes() { # racks
    cat <<YAML
cluster:
  generate:
    levels: [rack, kubernetes.io/hostname]
    fanout: [$1, 50]
    allocatable: {cpu: "64", memory: 512Gi, pods: "110"}
YAML
}

job_gang() { # pods
    local n=$1
    cat <<YAML
name: job-gang-$n
scheduler:
  featureGates: {GenericWorkload: true, GangScheduling: true, WorkloadWithJob: true}
$(nodes $(( n / 3000 + 1 )))
submit:
  - apiVersion: batch/v1
    kind: Job
    metadata: {name: train}
    spec:
      completionMode: Indexed
      parallelism: $n
      completions: $n
      template:
        spec:
          restartPolicy: Never
          containers: [{name: w, image: registry.example/worker, resources: {requests: {cpu: "1"}}}]
expect:
  objects:
    - {apiVersion: batch/v1, kind: Job, metadata: {name: train}, status: {active: $n}}
YAML
}

direct_gang() { # pods
    local n=$1
    cat <<YAML
name: gang-$n
scheduler:
  featureGates: {GenericWorkload: true, GangScheduling: true}
$(nodes $(( n / 3000 + 1 )))
submit:
  - apiVersion: scheduling.k8s.io/v1alpha2
    kind: PodGroup
    metadata: {name: pg}
    spec:
      schedulingPolicy: {gang: {minCount: $n}}
YAML
    awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "  - apiVersion: v1\n    kind: Pod\n    metadata: {name: p%d, namespace: default}\n    spec:\n      schedulingGroup: {podGroupName: pg}\n      containers: [{name: w, image: registry.example/worker, resources: {requests: {cpu: \"1\", memory: 1Gi}}}]\n", i }'
    cat <<YAML
expect:
  podGroups: {default/pg: {boundPods: $n}}
YAML
}

cron() { # hours
    cat <<YAML
name: cron-$1h
cluster:
  nodes:
    - metadata: {name: n1}
      status: {allocatable: {cpu: "64", memory: 512Gi, pods: "110"}}
submit:
  - apiVersion: batch/v1
    kind: CronJob
    metadata: {name: every-minute}
    spec:
      schedule: "* * * * *"
      jobTemplate:
        spec:
          template:
            metadata: {annotations: {placer.dev/run-time: 30s}}
            spec:
              restartPolicy: Never
              containers: [{name: w, image: registry.example/worker, resources: {requests: {cpu: "1"}}}]
steps:
  - advance: $1h
  - expect:
      objects:
        - {apiVersion: batch/v1, kind: CronJob, metadata: {name: every-minute}, status: {lastScheduleTime: {}}}
YAML
}

# Runs one case; prints "<name> <wall s> <cpu s> <peak MiB> <exit>" and keeps the wall time.
declare -A WALL
measure() { # name command...
    local name=$1
    shift
    local out="$DIR/$name.time"
    local code=0
    "$TIME" -f "%e %U %S %M" -o "$out" "$@" >"$DIR/$name.out" 2>"$DIR/$name.err" || code=$?
    # GNU time writes "Command exited with non-zero status N" first when the command fails.
    read -r wall user sys rss < <(tail -n 1 "$out")
    WALL[$name]=$wall
    printf '%-28s wall %7.2f s   cpu %7.2f s   peak %6d MiB   exit %d\n' \
        "$name" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" "$(( rss / 1024 ))" "$code"
}

ratio() { awk -v a="${WALL[$1]}" -v b="${WALL[$2]}" 'BEGIN { printf "%.2f", a / b }'; }

job_gang 10000 >"$DIR/job-gang-10000.yaml"
job_gang 20000 >"$DIR/job-gang-20000.yaml"
direct_gang 10000 >"$DIR/gang-10000.yaml"
direct_gang 20000 >"$DIR/gang-20000.yaml"
job_gang 100000 >"$DIR/job-100000.yaml"
direct_gang 9000 >"$DIR/gang-9000.yaml"
cron 10 >"$DIR/cron-10h.yaml"
cron 20 >"$DIR/cron-20h.yaml"

echo "placer: $PLACER ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "gang-9000.yaml: $(wc -c <"$DIR/gang-9000.yaml") bytes"
measure job-gang-10000 "$PLACER" simulate "$DIR/job-gang-10000.yaml"
measure job-gang-20000 "$PLACER" simulate "$DIR/job-gang-20000.yaml"
measure gang-10000 "$PLACER" simulate "$DIR/gang-10000.yaml"
measure gang-20000 "$PLACER" simulate "$DIR/gang-20000.yaml"
measure job-100000 "$PLACER" simulate "$DIR/job-100000.yaml"
measure gang-9000-validate "$PLACER" validate "$DIR/gang-9000.yaml"
measure gang-9000 "$PLACER" simulate "$DIR/gang-9000.yaml"
measure cron-10h "$PLACER" simulate "$DIR/cron-10h.yaml"
measure cron-20h "$PLACER" simulate "$DIR/cron-20h.yaml"
measure dev-zero "$PLACER" validate /dev/zero
echo "job gang 20,000 / 10,000: $(ratio job-gang-20000 job-gang-10000)x (bar: under 3x, and under 30 s)"
echo "direct gang 20,000 / 10,000: $(ratio gang-20000 gang-10000)x"
echo "cron 20 h / 10 h: $(ratio cron-20h cron-10h)x"
grep -h "error" "$DIR/dev-zero.err" | head -1
for f in "$DIR"/*.err; do
    if grep -q "panicked" "$f"; then
        echo "PANIC in $(basename "$f" .err)"
        exit 1
    fi
done
