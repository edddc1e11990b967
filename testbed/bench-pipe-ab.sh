#!/usr/bin/env bash
# Several `braid` binaries side by side on loopback, alternating transfer
# by transfer (so a change of machine load hits all of them alike): the
# encrypted pipe from `head -c … /dev/zero |` and with stdin from a file,
# each to `braid recv -o /dev/null`. Prints Gbit/s and the CPU-s per GB of
# the sending side (with `head` where it is the source) and of the
# receiver, median and range per binary (docs/BENCHMARKS.md).
#
#   testbed/bench-pipe-ab.sh OUTDIR LABEL=BINARY [LABEL=BINARY ...]
#
# Environment: BYTES (per transfer, default 2 GB), ROUNDS (default 5),
# N (connections, default 2), SEC (security flags, default a fresh key
# file: encrypted), PORT.
set -euo pipefail
OUT=${1:?OUTDIR}; shift
[ $# -ge 1 ] || { echo "usage: $0 OUTDIR LABEL=BINARY..." >&2; exit 2; }
BYTES=${BYTES:-2000000000}
ROUNDS=${ROUNDS:-5}
N=${N:-2}
PORT=${PORT:-9471}
mkdir -p "$OUT"
first=${1#*=}
"$first" keygen "$OUT/ab.key" >/dev/null 2>&1 || [ -f "$OUT/ab.key" ]
read -r -a SEC <<< "${SEC:---key $OUT/ab.key}"
head -c "$BYTES" /dev/zero > "$OUT/ab.in"
{ echo "date: $(date -u +%FT%TZ)"; echo "nproc: $(nproc)";
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p')"; echo "kernel: $(uname -r)";
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"; } > "$OUT/machine.txt"

cpu_s() { awk '{print $1 + $2}' "$1"; }
# Seconds since the epoch, with nanoseconds.
now() { date +%s.%N; }

# one LABEL BINARY FROM: one transfer; appends "label from gbit send recv".
one() {
  local label=$1 bin=$2 from=$3
  /usr/bin/time -f "%U %S" -o "$OUT/recv.time" "$bin" recv --no-progress \
    --listen 127.0.0.1:$PORT -o /dev/null "${SEC[@]}" 2>>"$OUT/recv.err" &
  local rx=$!
  for _ in $(seq 200); do ss -ltnH | grep -q ":$PORT " && break; sleep 0.02; done
  local send="\"$bin\" send --no-progress -n $N --to 127.0.0.1:$PORT ${SEC[*]}"
  case $from in
    pipe) send="head -c $BYTES /dev/zero | $send";;
    stdin) send="$send < \"$OUT/ab.in\"";;
  esac
  local t0 t1
  t0=$(now)
  /usr/bin/time -f "%U %S" -o "$OUT/send.time" bash -c "$send" 2>>"$OUT/send.err"
  wait $rx
  t1=$(now)
  awk -v l="$label" -v f="$from" -v b="$BYTES" -v t="$t1 - $t0" \
    -v s="$(cpu_s "$OUT/send.time")" -v r="$(cpu_s "$OUT/recv.time")" \
    'BEGIN { split(t, e, " - "); d = e[1] - e[2]; gb = b / 1e9;
             printf "%s %s %.3f %.3f %.3f\n", l, f, b * 8 / d / 1e9, s / gb, r / gb }' \
    >> "$OUT/runs.txt"
}

: > "$OUT/runs.txt"
for r in $(seq "$ROUNDS"); do
  for from in pipe stdin; do
    for lb in "$@"; do one "${lb%%=*}" "${lb#*=}" "$from"; done
  done
  echo "round $r of $ROUNDS done" >&2
done
rm -f "$OUT/ab.in"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
python3 - "$OUT/runs.txt" <<'PY'
import sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    label, src, g, s, r = line.split()
    rows.setdefault((src, label), []).append((float(g), float(s), float(r)))
print("| input | binary | Gbit/s median | range | send CPU-s/GB | recv CPU-s/GB |")
print("| --- | --- | --- | --- | --- | --- |")
for (src, label), v in rows.items():
    g = sorted(x[0] for x in v)
    print(f"| {src} | {label} | {st.median(g):.2f} | {g[0]:.2f}–{g[-1]:.2f} "
          f"| {st.median(x[1] for x in v):.3f} | {st.median(x[2] for x in v):.3f} |")
PY
