#!/usr/bin/env bash
# One link, two drivers: braid-sim's `rudp-reno` benchmark (IQ-RUDP bulk
# transfer over 20 Mbit/s, 30 ms RTT, a 75,000-byte drop-tail queue, random
# loss forward) and the same link on the real kernel through `braid emulate`
# (testbed channel 20mbit/15ms/LOSS with BT_QUEUE=75000) with `braid perf`.
# Needs root and a release build; results in docs/BENCHMARKS.md.
#
#   testbed/bench-sim-vs-kernel.sh [SECS]      # default 60 s per run
#
# Environment: BRAID (binary), LOSSES (default "0.01 0.001"), CCS (default
# "newreno cubic").
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
export BRAID=${BRAID:-$HERE/../target/release/braid}
export BT_OWNER=$$
SECS=${1:-60}
NET="bash $HERE/netns.sh"
trap '$NET down simkern >/dev/null 2>&1 || true' EXIT
echo "# $(date -u +%FT%TZ) nproc $(nproc) $(uname -r) secs $SECS"
printf '%-6s %-8s %10s %10s %7s %s\n' loss cc sim_mbps kern_mbps ratio "kernel loss/rtt/load"
for loss in ${LOSSES:-0.01 0.001}; do
  pct=$(awk "BEGIN{print $loss*100}")
  sim=$("$BRAID" sim rudp-reno --loss "$loss" --secs "$SECS")
  BT_QUEUE=75000 $NET up simkern "20mbit/15ms/${pct}%"
  for cc in ${CCS:-newreno cubic}; do
    want=NewReno; [[ $cc == cubic ]] && want=CUBIC
    s=$(sed -n "s/^ *$want *goodput \([0-9.]*\) Mbit.*/\1/p" <<<"$sim")
    $NET exec simkern r "$BRAID" perf server --open --once --format json >/dev/null 2>&1 &
    sleep 0.5
    k=$($NET exec simkern s "$BRAID" perf client --open --to 198.18.1.2:7401 --transport rudp \
          --congestion "$cc" --duration "${SECS}s" --format json | tail -1)
    wait || true
    read -r g l r < <(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["goodput_mbps"], d["loss_pct"], d["rtt_ms"])' "$k")
    printf '%-6s %-8s %10.2f %10.2f %7.2f %.2f%% %.1fms load %s\n' "$loss" "$cc" "$s" "$g" \
      "$(awk "BEGIN{print $g/$s}")" "$l" "$r" "$(cut -d' ' -f1 /proc/loadavg)"
  done
  $NET down simkern
done
