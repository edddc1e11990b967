#!/usr/bin/env bash
# A session path over UDP (`direct`) against one over TCP (`direct+tcp`):
# goodput of a greedy bulk stream and the p95 latency of a 100-byte message
# every 10 ms beside it, on loopback and on an emulated link, alternating
# the two in one run (docs/BENCHMARKS.md, "Issue 12: a path over TCP").
#
#   testbed/bench-session-tcp.sh [RUNS [SECONDS [CHANNEL]]]
#
# Needs root and the testbed (testbed/README.md); BRAID is the braid binary
# (for the emulator), BENCH the session_tcp_bench example
# (cargo build --release -p braid --example session_tcp_bench).
set -euo pipefail
RUNS=${1:-3}
SECS=${2:-15}
CHANNEL=${3:-20mbit/20ms/1%}
here=$(cd "$(dirname "$0")" && pwd)
: "${BENCH:?set BENCH to the session_tcp_bench binary}"
export BT_OWNER=$$
NAME=stcp
trap '"$here/netns.sh" down $NAME >/dev/null 2>&1 || true' EXIT

one() { # where path port
    local where=$1 path=$2 port=$3 out
    if [ "$where" = loopback ]; then
        "$BENCH" sink "127.0.0.1:$port" >/tmp/stcp.$$ &
        sleep 0.3
        timeout $((SECS + 60)) "$BENCH" source "127.0.0.1:$port" "$path" "$SECS"
    else
        "$here/netns.sh" exec $NAME r "$BENCH" sink "198.18.1.2:$port" >/tmp/stcp.$$ &
        sleep 0.3
        "$here/netns.sh" exec $NAME s timeout $((SECS + 60)) "$BENCH" source "198.18.1.2:$port" "$path" "$SECS"
    fi
    wait
    out=$(cat /tmp/stcp.$$)
    echo "$where $path $out"
}

echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
port=19100
for r in $(seq "$RUNS"); do
    for p in direct direct+tcp; do
        one loopback "$p" $((port++))
    done
done
"$here/netns.sh" up $NAME "$CHANNEL" >/dev/null
for r in $(seq "$RUNS"); do
    for p in direct direct+tcp; do
        one "$CHANNEL" "$p" $((port++))
    done
done
echo "# done, load $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f /tmp/stcp.$$
