#!/usr/bin/env bash
# IQ-RUDP's CPU per Gbit on loopback, two binaries alternating (issue 13 §3).
#
#   OLD=path/to/braid-before NEW=target/release/braid MODE=default|th1|th2|crypto \
#     [R=5] testbed/bench-rudp-cpu.sh
#
# MODE default: not pinned, each binary's default runtime threads;
#      th1/th2: client on core 0, server on core 1, BRAID_PERF_THREADS=1/2
#      for both; crypto: NEW only, --open / --key K --no-encrypt / --key K.
# OLD may predate the access flags (it is run without them). One line per
# run: MODE NAME goodput_mbps client_cpu_s_per_gbit server_cpu_s_per_gbit
# all_delivered. Run it on a quiet machine: nothing else, no build.
set -euo pipefail
NEW=${NEW:-target/release/braid}
OLD=${OLD:-}
MODE=${MODE:-default}
R=${R:-5}
PORT=${PORT:-7419}
KEY=$(mktemp)
trap 'rm -f "$KEY"' EXIT
rm -f "$KEY"
"$NEW" keygen "$KEY" > /dev/null 2>&1

one() { # NAME BINARY PIN THREADS ACCESS...
  local name=$1 bin=$2 pin=$3 th=$4
  shift 4
  local env=() ps=() pc=()
  [[ -n $th ]] && env=(BRAID_PERF_THREADS="$th")
  [[ $pin == 1 ]] && { ps=(taskset -c 1); pc=(taskset -c 0); }
  env "${env[@]}" "${ps[@]}" "$bin" perf server --once --listen "127.0.0.1:$PORT" "$@" > /dev/null 2>&1 &
  local sp=$!
  sleep 0.4
  env "${env[@]}" "${pc[@]}" "$bin" perf client --to "127.0.0.1:$PORT" --duration 5s --format json "$@" 2> /dev/null |
    tail -1 | python3 -c "
import json, sys
d = json.loads(sys.stdin.read())
print('$MODE $name', round(d['goodput_mbps']), round(d['client_cpu_s_per_gbit'], 4),
      round(d['server_cpu_s_per_gbit'], 4), d['delivered_bytes'] == d['sent_bytes'])"
  wait "$sp" || true
}

[[ $MODE == crypto || -n $OLD ]] || { echo "bench-rudp-cpu.sh: set OLD=" >&2; exit 2; }
for _ in $(seq "$R"); do
  case $MODE in
    default) one old "$OLD" 0 ""; one new "$NEW" 0 "" --open ;;
    th1) one old "$OLD" 1 1; one new "$NEW" 1 1 --open ;;
    th2) one old "$OLD" 1 2; one new "$NEW" 1 2 --open ;;
    crypto)
      one open "$NEW" 1 1 --open
      one integrity "$NEW" 1 1 --key "$KEY" --no-encrypt
      one encrypted "$NEW" 1 1 --key "$KEY"
      ;;
    *) echo "bench-rudp-cpu.sh: MODE is default|th1|th2|crypto" >&2; exit 2 ;;
  esac
done
