#!/usr/bin/env bash
# Same-run before/after comparison of two `braid` binaries (issue 9: a
# refactor must keep every figure). Runs, interleaved so both see the same
# machine: RUDP loopback goodput and CPU per gigabit (`braid perf`), the
# pipe on loopback vs iperf3, and the pipe's static 20+10 and 30+20+10
# tables over tbf-shaped namespaces. Needs root, iproute2, iperf3, python3.
#
#   testbed/bench-compare.sh BEFORE_BIN AFTER_BIN OUTDIR [rudp|loopback|static|all]
#
# Environment: REPS (default 3), DUR (RUDP seconds, default 10), SETUPS
# (static, default "A B"). Results: OUTDIR/{before,after}/… and a summary on
# stdout.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BEFORE=$(realpath "${1:?before binary}")
AFTER=$(realpath "${2:?after binary}")
OUT=${3:?OUTDIR}
what=${4:-all}
REPS=${REPS:-3}
DUR=${DUR:-10}
mkdir -p "$OUT/before" "$OUT/after"
echo "# $(date -u +%FT%TZ) nproc=$(nproc) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# load $(cut -d' ' -f1-3 /proc/loadavg); before=$BEFORE after=$AFTER"

rudp() { # one rep of RUDP loopback for one binary: prints goodput and CPU
  local b=$1 tag=$2 r=$3 acc=()
  # Unauthenticated on both sides, as before keys were the default
  # (binaries from before issue 13 know no --open).
  "$b" perf server --help | grep -q -- '--open' && acc=(--open)
  "$b" perf server "${acc[@]}" --listen 127.0.0.1:7401 > "$OUT/$tag/rudp-srv.txt" 2>&1 &
  local bs=$!
  for _ in $(seq 100); do ss -lunH | grep -q ":7401 " && break; sleep 0.02; done
  "$b" perf client "${acc[@]}" --to 127.0.0.1:7401 --duration "${DUR}s" --format json \
    > "$OUT/$tag/rudp-$r.json"
  kill "$bs" 2>/dev/null || true
  wait "$bs" 2>/dev/null || true
  tail -1 "$OUT/$tag/rudp-$r.json" | python3 -c 'import json,sys
s=json.load(sys.stdin)
print("rudp,%s,%s,%.0f,%.3f,%.3f" % (sys.argv[1], sys.argv[2], s["goodput_mbps"],
  s["client_cpu_s_per_gbit"], s["server_cpu_s_per_gbit"]))' "$tag" "$r"
}

run_rudp() {
  echo "kind,binary,rep,goodput_mbps,client_cpu_s_per_gbit,server_cpu_s_per_gbit"
  for r in $(seq "$REPS"); do
    rudp "$BEFORE" before "$r"
    rudp "$AFTER" after "$r"
  done | tee "$OUT/rudp.csv"
}

run_loopback() {
  for r in $(seq "$REPS"); do
    for tag in before after; do
      local b=$BEFORE; [[ $tag == after ]] && b=$AFTER
      BRAID=$b REPS=1 bash "$HERE/bench-pipe.sh" loopback "$OUT/$tag" > /dev/null
      awk -F, -v OFS=, -v r="$r" -v t="$tag" 'NR > 1 { $3 = r; print t, $0 }' \
        "$OUT/$tag/loopback.csv" | tee -a "$OUT/loopback.csv"
    done
  done
}

run_static() {
  local s
  for s in ${SETUPS:-A B}; do
    for tag in before after; do
      local b=$BEFORE; [[ $tag == after ]] && b=$AFTER
      BRAID=$b REFS=0 SETUPS=$s bash "$HERE/bench-pipe.sh" static "$OUT/$tag" > /dev/null
    done
  done
  python3 - "$OUT" <<'PY'
import csv, sys, collections
out = sys.argv[1]
for tag in ("before", "after"):
    rows = list(csv.DictReader(open(f"{out}/{tag}/static.csv")))
    agg = collections.defaultdict(list)
    for r in rows:
        agg[(r["setup"], r["label"])].append(float(r["bps"]) / float(r["sum_bps"]))
    for (setup, label), v in sorted(agg.items()):
        print(f"static,{tag},{setup},{label},mean {100*sum(v)/len(v):.1f} %,min {100*min(v):.1f} %,"
              + " ".join(f"{100*x:.1f}" for x in v))
PY
}

case "$what" in
  rudp) run_rudp;;
  loopback) run_loopback;;
  static) run_static;;
  all) run_rudp; run_loopback; run_static;;
  *) echo "unknown: $what" >&2; exit 2;;
esac
