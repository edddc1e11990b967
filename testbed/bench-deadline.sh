#!/usr/bin/env bash
# testbed/bench-deadline.sh: seed 004 Fig. 6-7 -- a deadline transfer over a
# premium reservation and a scavenger part, with and without periodic
# congestion (docs/BENCHMARKS.md, "Issue 14: deadline transfers").
#
#   sudo testbed/bench-deadline.sh [quiet|congested|both]   (default: both)
#
# Setup (the seed's, scaled to what this kernel has): two namespaces joined
# by a veth pair whose sender side is the bottleneck, an htb of LINK
# (default 42mbit, the seed's ATM link) with three classes standing for the
# DiffServ ones -- premium (rate PREMIUM_CLASS, default 12mbit, the seed's
# initial reservation; prio 0), best effort (the rest less 1 Mbit/s; prio 1;
# the default class) and scavenger (1 Mbit/s guaranteed, may borrow what
# the others leave; prio 2) -- classified by u32 on the receiver's port:
# the pipe's connection 0 goes to port 5001 (premium), connection 1 to port
# 5002 (scavenger). A `braid broker` in the sender's namespace holds a
# "premium" resource of PREMIUM_CAP (default 20mbit). `braid send
# --deadline DEADLINE` sends SIZE (default 280MB) with the seed's 10 s of
# 200 s margin (5 %) and 25 MB updates. Congestion: an iperf3 UDP flood of
# FLOOD (default 40M) in the best-effort class at 10-20, 40-50 and 70-80 s,
# as in the seed's Fig. 7. The htb premium class stays at the initial rate
# (enforcement that follows the reservation is not this script's part);
# the sender's pace follows the lowered reservation. No delay is emulated
# (the seed gives none for its ATM testbed).
#
# Output: one JSON line per run on stdout (finish time, deadline met, the
# reservation's updates, bytes per part), a per-second CSV of the htb
# classes' bytes under OUT (default /tmp/bench-deadline).
set -euo pipefail

BRAID="${BRAID:-$(pwd)/target/release/braid}"
SIZE="${SIZE:-280MB}"
DEADLINE="${DEADLINE:-200s}"
LINK="${LINK:-42mbit}"
PREMIUM_CLASS="${PREMIUM_CLASS:-12mbit}"
PREMIUM_CAP="${PREMIUM_CAP:-20mbit}"
MARGIN="${MARGIN:-5%}"
UPDATE="${UPDATE:-25MB}"
FLOOD="${FLOOD:-40M}"
OUT="${OUT:-/tmp/bench-deadline}"
WHICH="${1:-both}"
S=sender-dl-s
R=sender-dl-r
SA=198.18.200.1
RA=198.18.200.2

mbit() { # "42mbit" -> 42
  echo "${1%mbit}"
}

cleanup() {
  for p in $(jobs -p); do kill "$p" 2>/dev/null || true; done
  ip netns pids "$S" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns pids "$R" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns del "$S" 2>/dev/null || true
  ip netns del "$R" 2>/dev/null || true
}

setup() {
  cleanup
  ip netns add "$S"
  ip netns add "$R"
  ip link add sdl0 netns "$S" type veth peer name rdl0 netns "$R"
  ip -n "$S" addr add "$SA/24" dev sdl0
  ip -n "$R" addr add "$RA/24" dev rdl0
  for n in "$S" "$R"; do
    ip -n "$n" link set lo up
  done
  ip -n "$S" link set sdl0 up
  ip -n "$R" link set rdl0 up
  local link be
  link=$(mbit "$LINK")
  be=$((link - $(mbit "$PREMIUM_CLASS") - 1))
  local tc="ip netns exec $S tc"
  $tc qdisc add dev sdl0 root handle 1: htb default 20 r2q 100
  $tc class add dev sdl0 parent 1: classid 1:1 htb rate "$LINK" ceil "$LINK"
  $tc class add dev sdl0 parent 1:1 classid 1:10 htb rate "$PREMIUM_CLASS" ceil "$LINK" prio 0
  $tc class add dev sdl0 parent 1:1 classid 1:20 htb rate "${be}mbit" ceil "$LINK" prio 1
  $tc class add dev sdl0 parent 1:1 classid 1:30 htb rate 1mbit ceil "$LINK" prio 2
  for c in 10 20 30; do
    $tc qdisc add dev sdl0 parent "1:$c" handle "$c:" pfifo limit 100
  done
  $tc filter add dev sdl0 parent 1: protocol ip prio 1 u32 match ip dport 5001 0xffff flowid 1:10
  $tc filter add dev sdl0 parent 1: protocol ip prio 1 u32 match ip dport 5002 0xffff flowid 1:30
}

# Per-second bytes of the premium, best-effort and scavenger classes.
sample() { # csv
  local t=0
  echo "t,premium_bytes,best_effort_bytes,scavenger_bytes" >"$1"
  while true; do
    local line
    line=$(ip netns exec "$S" tc -s class show dev sdl0 | awk '
      /^class htb/ {c=$3} /Sent/ {b[c]=$2}
      END {printf "%s,%s,%s", b["1:10"], b["1:20"], b["1:30"]}')
    echo "$t,$line" >>"$1"
    sleep 1
    t=$((t + 1))
  done
}

run() { # quiet|congested
  local kind=$1
  setup
  mkdir -p "$OUT"
  printf 'secret = "%s"\n[[resource]]\nname = "premium"\nkind = "network"\ncapacity = "%s"\n' \
    "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" "$PREMIUM_CAP" >"$OUT/broker.toml"
  rm -f "$OUT/broker.db"*
  ip netns exec "$S" "$BRAID" broker --config "$OUT/broker.toml" --listen 127.0.0.1:7080 \
    --db "$OUT/broker.db" 2>"$OUT/broker-$kind.log" &
  local token
  token=$("$BRAID" broker token --config "$OUT/broker.toml" --user bench --role user --ttl 1d)
  for _ in $(seq 100); do
    ip netns exec "$S" bash -c 'exec 3<>/dev/tcp/127.0.0.1/7080' 2>/dev/null && break
    sleep 0.1
  done
  ip netns exec "$R" iperf3 -s -D -1 >/dev/null 2>&1 || true
  ip netns exec "$R" "$BRAID" recv --listen "$RA:5001,$RA:5002" --insecure --no-progress \
    -o /dev/null 2>"$OUT/recv-$kind.log" &
  local recv=$!
  sleep 0.5
  sample "$OUT/classes-$kind.csv" &
  local sampler=$!
  if [ "$kind" = congested ]; then
    (
      for at in 10 40 70; do
        sleep $((at - ${prev:-0}))
        prev=$((at + 10))
        ip netns exec "$S" iperf3 -c "$RA" -u -b "$FLOOD" -l 1400 -t 10 >/dev/null 2>&1 || true
        ip netns exec "$R" iperf3 -s -D -1 >/dev/null 2>&1 || true
      done
    ) &
  fi
  ip netns exec "$S" "$BRAID" send --to "$RA:5001,$RA:5002" -n 2 --insecure --no-progress \
    --broker http://127.0.0.1:7080 --token "$token" --deadline "$DEADLINE" --resource premium \
    --margin "$MARGIN" --update-every "$UPDATE" --stats-file "$OUT/stats-$kind.json" \
    "$OUT/input" 2>"$OUT/send-$kind.log"
  wait "$recv" || true
  kill "$sampler" 2>/dev/null || true
  python3 - "$OUT/stats-$kind.json" "$kind" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
d = s["deadline"]
print(json.dumps({
    "run": sys.argv[2],
    "finish_s": round(d["finish_seconds"], 1),
    "deadline_s": d["deadline_seconds"],
    "met": d["met"],
    "mbit_s": round(s["bps"] / 1e6, 1),
    "premium_initial_mbit": d["initial_rate_bps"] / 1e6,
    "premium_final_mbit": d["final_rate_bps"] / 1e6,
    "updates": [[round(t, 1), round(r / 1e6, 2)] for t, r in d["lowered"]],
    "premium_mb": round(d["premium_bytes"] / 1e6, 1),
    "scavenger_mb": round(d["scavenger_bytes"] / 1e6, 1),
}))
EOF
  cleanup
}

trap cleanup EXIT
mkdir -p "$OUT"
if [ ! -s "$OUT/input" ] || [ "$(stat -c %s "$OUT/input")" != "$(python3 -c "
import sys; u={'MB':10**6,'GB':10**9}; s='$SIZE'; print(int(float(s[:-2])*u[s[-2:]]))")" ]; then
  python3 -c "
import os, sys; u={'MB':10**6,'GB':10**9}; s='$SIZE'; n=int(float(s[:-2])*u[s[-2:]])
f=open('$OUT/input','wb')
while n > 0:
    k=min(n, 1<<24); f.write(os.urandom(k)); n-=k
"
fi
case "$WHICH" in
  quiet) run quiet ;;
  congested) run congested ;;
  both) run quiet; run congested ;;
  *) echo "usage: $0 [quiet|congested|both]" >&2; exit 2 ;;
esac
