#!/usr/bin/env bash
# A real one-node Slurm cluster on localhost (Debian's slurm-wlm and munge; ctest
# Cluster.SlurmJobArrayMatchesOneProcess, label `cluster`; experiments/README.md "Cluster
# scale"): starts munged, slurmctld and slurmd in the foreground with a private config, key,
# sockets and state under a temporary directory (no cgroup plugins: proctrack/linuxproc,
# task/none), writes a sweep's job
# array with `speclab slurm`, submits it with sbatch, waits, checks `speclab status`, merges the
# shards with `speclab merge` and compares the merged summary with a single-process run's, timing
# columns aside. Every daemon it started is stopped on exit, whatever happens.
#
#   tests/cluster/slurm_sweep.sh SPECLAB
#
# Needs root (slurmd starts the tasks as the submitting user) and the packages; without them it
# exits 77 (ctest: skipped), or 1 when SPECLAB_CLUSTER_REQUIRED=1 (CI, where it must run).
set -euo pipefail
speclab=$(realpath "$1")

skip() {
  echo "cluster test: $1" >&2
  if [ "${SPECLAB_CLUSTER_REQUIRED:-0}" = 1 ]; then exit 1; fi
  exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root to start slurmd; skipped"
for tool in munged slurmctld slurmd sbatch scontrol sinfo; do
  command -v "$tool" >/dev/null ||
    skip "$tool not found; install Debian's slurm-wlm and munge (apt-get install slurm-wlm munge)"
done

work=$(mktemp -d /tmp/speclab-slurm.XXXXXX)
pids=()
finish() {
  local status=$?
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$status" -ne 0 ]; then
    for log in "$work"/log/*; do
      [ -f "$log" ] && { echo "---- $log"; tail -n 30 "$log"; }
    done
    for log in "$work"/results/slurm-*.out; do
      [ -f "$log" ] && { echo "---- $log"; cat "$log"; }
    done
  fi
  rm -rf "$work"
  exit "$status"
}
trap finish EXIT
trap 'exit 130' INT TERM
mkdir -p "$work"/{etc,state,spool,log,munge}
chmod 700 "$work/munge"

# munge: a private key and socket.
head -c 1024 /dev/urandom >"$work/munge/munge.key"
chmod 400 "$work/munge/munge.key"
munged --foreground --force --key-file="$work/munge/munge.key" --socket="$work/munge/socket" \
  --pid-file="$work/munge/munged.pid" --seed-file="$work/munge/seed" \
  --log-file="$work/log/munged.log" >>"$work/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$work/munge/socket" ] && break; sleep 0.1; done
[ -S "$work/munge/socket" ] || { echo "cluster test: munged did not start" >&2; exit 1; }

host=$(hostname -s)
port=$((20000 + RANDOM % 20000))
export SLURM_CONF="$work/etc/slurm.conf"
cat >"$SLURM_CONF" <<CONF
ClusterName=speclab-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/socket
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=speclab Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF

slurmctld -D -i -f "$SLURM_CONF" >>"$work/log/slurmctld.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.2; done
scontrol ping | grep -q UP || { echo "cluster test: slurmctld did not answer" >&2; exit 1; }
slurmd -D -N "$host" -f "$SLURM_CONF" >>"$work/log/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ "$(sinfo -h -N -o %T)" = idle ] && break; sleep 0.2; done
[ "$(sinfo -h -N -o %T)" = idle ] || { echo "cluster test: node not idle: $(sinfo -N)" >&2; exit 1; }
echo "cluster test: one-node cluster up ($(sinfo -h -o '%P %D %T %C'))"

# The four points of tests/data/tiny_sweep.toml in three array tasks (two, one and one point).
config="$work/sweep.toml"
cp "$(dirname "$0")/../data/tiny_sweep.toml" "$config"

"$speclab" slurm "$config" --results "$work/results" --array-size 3 --time 5 \
  --partition speclab -o "$work/sweep.sh"
grep -q '^#SBATCH --array=1-3$' "$work/sweep.sh"
# Before any task: every point missing (exit 3).
status=0
"$speclab" status "$config" "$work/results" >/dev/null || status=$?
[ "$status" -eq 3 ] || { echo "cluster test: status before the run exited $status" >&2; exit 1; }

job=$(sbatch --parsable "$work/sweep.sh")
echo "cluster test: submitted job array $job"
deadline=$((SECONDS + 150))
while squeue -h -j "$job" 2>/dev/null | grep -q .; do
  [ "$SECONDS" -lt "$deadline" ] || { echo "cluster test: job $job still queued" >&2; squeue; exit 1; }
  sleep 1
done
for task in 1 2 3; do
  state=$(scontrol -o show job "${job}_${task}" | grep -o 'JobState=[A-Z]*' | head -n1)
  [ "$state" = JobState=COMPLETED ] ||
    { echo "cluster test: task $task: $state" >&2; exit 1; }
  grep -q "(shard $task/3)" "$work/results/slurm-${job}_${task}.out" ||
    { echo "cluster test: task $task's log does not show shard $task/3" >&2; exit 1; }
done
ls "$work"/results/summary.shard-*-of-3.csv | wc -l | grep -qx 3

"$speclab" status "$config" "$work/results" | tee "$work/status.txt"
grep -q "4 points in 3 shards: 4 done, 0 partial, 0 missing" "$work/status.txt"
"$speclab" merge "$work/results" -o "$work/merged"
"$speclab" run "$config" --out "$work/single" >/dev/null

# The merged summary against the single process's, every column but the time-valued metrics
# (`speclab schema --json`: the metrics whose time_valued is true).
"$speclab" schema --json >"$work/schema.json"
/usr/bin/python3 - "$work/merged/summary.csv" "$work/single/summary.csv" "$work/schema.json" <<'PY'
import csv, json, sys
with open(sys.argv[3]) as f:
    run_schema = next(s for s in json.load(f)["schemas"] if s["schema"] == "speclab.run")
timing = {m["name"] for m in run_schema["metrics"] if m["time_valued"]}
assert {"seconds", "speedup", "started"} <= timing, f"time-valued metrics: {sorted(timing)}"
def rows(path):
    with open(path, newline="") as f:
        table = list(csv.DictReader(f))
    return {r["id"]: {k: v for k, v in r.items() if k not in timing} for r in table}, table
merged, merged_table = rows(sys.argv[1])
single, single_table = rows(sys.argv[2])
assert len(single) == 4, f"single-process summary has {len(single)} points; expected 4"
assert list(merged_table[0].keys()) == list(single_table[0].keys()), "columns differ"
assert merged.keys() == single.keys(), f"points differ: {sorted(merged.keys() ^ single.keys())}"
for point, row in single.items():
    diff = {k: (merged[point][k], v) for k, v in row.items() if merged[point][k] != v}
    assert not diff, f"point {point}: merged vs single differ in {diff}"
compared = len(single_table[0]) - len(timing & set(single_table[0]))
print(f"cluster test: merged summary equals the single-process one "
      f"({len(single)} points, {compared} columns compared)")
PY
