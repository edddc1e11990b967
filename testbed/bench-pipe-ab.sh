#!/usr/bin/env bash
# Several `braid` binaries side by side on loopback, alternating transfer
# by transfer (so a change of machine load hits all of them alike; the
# order rotates every round): the encrypted pipe from `head -c … /dev/zero
# |` and with stdin from a file, each to `braid recv -o /dev/null`. Prints
# Gbit/s and the CPU-s per GB of the sending side (with `head` where it is
# the source) and of the receiver, median and range per binary
# (docs/BENCHMARKS.md).
#
#   testbed/bench-pipe-ab.sh OUTDIR LABEL=BINARY [LABEL=BINARY ...]
#
# Environment: BYTES (per transfer, default 2 GB), ROUNDS (default 5),
# N (connections, default 2), SEC (security flags, default `--key` with a
# fresh key file: encrypted), PORT.
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
if [ -n "${SEC:-}" ]; then read -r -a SEC <<< "$SEC"; else SEC=(--key "$OUT/ab.key"); fi

# A receiver left behind by a failed transfer, and the input file, go at
# exit; the receiver runs in its own process group so the whole group
# (`time` and `braid recv`) can be stopped.
rx=""
cleanup() {
  if [ -n "$rx" ]; then kill -- "-$rx" 2>/dev/null || true; fi
  rm -f "$OUT/ab.in"
}
trap cleanup EXIT

head -c "$BYTES" /dev/zero > "$OUT/ab.in"
sync  # the first transfers do not compete with the writeback
{ echo "date: $(date -u +%FT%TZ)"; echo "nproc: $(nproc)";
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p')"; echo "kernel: $(uname -r)";
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"; } > "$OUT/machine.txt"

cpu_s() { awk '{print $1 + $2}' "$1"; }
now() { date +%s.%N; }
listening() { local s; s=$(ss -ltnH "sport = :$PORT"); [ -n "$s" ]; }

# one LABEL BINARY FROM: one transfer; appends "label from gbit send recv".
one() {
  local label=$1 bin=$2 from=$3
  setsid /usr/bin/time -f "%U %S" -o "$OUT/recv.time" "$bin" recv --no-progress \
    --listen "127.0.0.1:$PORT" -o /dev/null "${SEC[@]}" 2>>"$OUT/recv.err" &
  rx=$!
  for _ in $(seq 200); do listening && break; sleep 0.02; done
  local send
  printf -v send '%q ' "$bin" send --no-progress -n "$N" --to "127.0.0.1:$PORT" "${SEC[@]}"
  case $from in
    pipe) send="head -c $BYTES /dev/zero | $send";;
    stdin) send="$send < $(printf '%q' "$OUT/ab.in")";;
  esac
  local t0 t1
  t0=$(now)
  /usr/bin/time -f "%U %S" -o "$OUT/send.time" bash -c "$send" 2>>"$OUT/send.err"
  wait "$rx"
  rx=""
  t1=$(now)
  awk -v l="$label" -v f="$from" -v b="$BYTES" -v t0="$t0" -v t1="$t1" \
    -v s="$(cpu_s "$OUT/send.time")" -v r="$(cpu_s "$OUT/recv.time")" \
    'BEGIN { gb = b / 1e9;
             printf "%s %s %.3f %.3f %.3f\n", l, f, b * 8 / (t1 - t0) / 1e9, s / gb, r / gb }' \
    >> "$OUT/runs.txt"
}

: > "$OUT/runs.txt"
bins=("$@")
for r in $(seq "$ROUNDS"); do
  for from in pipe stdin; do
    for i in "${!bins[@]}"; do
      lb=${bins[$(( (i + r) % ${#bins[@]} ))]}
      one "${lb%%=*}" "${lb#*=}" "$from"
    done
  done
  echo "round $r of $ROUNDS done" >&2
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
python3 - "$OUT/runs.txt" "${bins[@]%%=*}" <<'PY'
import sys, statistics as st
order = sys.argv[2:]
rows = {}
for line in open(sys.argv[1]):
    label, src, g, s, r = line.split()
    rows.setdefault((src, label), []).append((float(g), float(s), float(r)))
print("| input | binary | Gbit/s median | range | send CPU-s/GB | recv CPU-s/GB |")
print("| --- | --- | --- | --- | --- | --- |")
for (src, label), v in sorted(rows.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]))):
    g = sorted(x[0] for x in v)
    print(f"| {src} | {label} | {st.median(g):.2f} | {g[0]:.2f}–{g[-1]:.2f} "
          f"| {st.median(x[1] for x in v):.3f} | {st.median(x[2] for x in v):.3f} |")
PY
