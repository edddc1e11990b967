#!/usr/bin/env bash
# testbed/bench-fig5.sh: seed 004 Fig. 5 -- foreground reservations, a
# background bulk transfer following the broker's share, and a best-effort
# UDP flood on one bottleneck (docs/BENCHMARKS.md, "Issue 14: Fig. 5").
#
#   sudo SCALE=0.5 testbed/bench-fig5.sh        (SCALE 1 = the seed's 195 s)
#
# Setup: namespaces fig5-s (senders, the broker) and fig5-r (receivers)
# joined by a veth pair whose sender side is the bottleneck: an htb of LINK
# (100mbit). A `braid broker` holds a "premium" resource of PREMIUM
# (45mbit). Timeline, in the seed's seconds times SCALE: the background
# (`braid send --reservation BG`, class background, min 1mbit) from 0 to
# 185; an iperf3 UDP flood of 80 Mbit/s in 1000-byte datagrams (the seed's
# 1000 bytes every 100 us) from 3 to 195; foreground flows, each on an
# immediate reservation made, committed and cancelled by the script:
# 36mbit reserved / `--rate 32mbit` sent from 25 to 48, 9 / 8 from 75 to
# 105, 18 / 16 from 130 to 160. Each flow has its own receiver port.
#
# Enforcement: when `braid broker --help` shows --enforce, the broker
# shapes each provisioned reservation itself (resource device + --flow);
# otherwise this script builds the classes -- 1:10 premium (rate PREMIUM)
# with one leaf per flow (prio 0), 1:20 best effort (rate LINK - PREMIUM,
# ceil LINK, prio 1, the default) -- and bench-fig5.py sets each leaf's
# rate from the broker's events (`braid reserve watch --format json`): a
# provisioned foreground reservation's rate, the background's share, an
# idle rate otherwise. run.json says which was used.
#
# Output under OUT (default /tmp/bench-fig5): samples.csv (per second:
# htb class bytes and drops, bytes each receiver wrote), senders' stats,
# logs, and the per-phase table of bench-fig5.py on stdout.
set -euo pipefail

BRAID="${BRAID:-$(pwd)/target/release/braid}"
SCALE="${SCALE:-0.5}"
LINK="${LINK:-100mbit}"
PREMIUM="${PREMIUM:-45mbit}"
OUT="${OUT:-/tmp/bench-fig5}"
TRIM="${TRIM:-1}"
HERE="$(cd "$(dirname "$0")" && pwd)"
S=fig5-s
R=fig5-r
SA=198.18.205.1
RA=198.18.205.2
DEV=f5s0

cleanup() {
  for p in $(jobs -p); do kill "$p" 2>/dev/null || true; done
  ip netns pids "$S" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns pids "$R" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns del "$S" 2>/dev/null || true
  ip netns del "$R" 2>/dev/null || true
}

mbit() { echo "${1%mbit}"; }
at() { python3 -c "print($1 * $SCALE)"; }
# Sleeps until seed second $1 (scaled) after t0.
until_seed() {
  local d
  d=$(python3 -c "import time; print(max(0.0, $(cat "$OUT/t0") + $1 * $SCALE - time.time()))")
  sleep "$d"
}

setup() {
  cleanup
  ip netns add "$S"
  ip netns add "$R"
  ip link add "$DEV" netns "$S" type veth peer name f5r0 netns "$R"
  ip -n "$S" addr add "$SA/24" dev "$DEV"
  ip -n "$R" addr add "$RA/24" dev f5r0
  for n in "$S" "$R"; do ip -n "$n" link set lo up; done
  ip -n "$S" link set "$DEV" up
  ip -n "$R" link set f5r0 up
  [ "$ENFORCE" = broker ] && return
  local tc="ip netns exec $S tc" be
  be=$(($(mbit "$LINK") - $(mbit "$PREMIUM")))
  $tc qdisc add dev "$DEV" root handle 1: htb default 20
  $tc class add dev "$DEV" parent 1: classid 1:1 htb rate "$LINK" ceil "$LINK" quantum 1514
  $tc class add dev "$DEV" parent 1:1 classid 1:10 htb rate "$PREMIUM" ceil "$LINK" quantum 1514
  $tc class add dev "$DEV" parent 1:1 classid 1:20 htb rate "${be}mbit" ceil "$LINK" \
    quantum 1514 prio 1
  $tc qdisc add dev "$DEV" parent 1:20 handle 20: pfifo limit 100
  local c
  for c in 11 12 13 14; do # bg, fg1, fg2, fg3: idle until provisioned
    $tc class add dev "$DEV" parent 1:10 classid "1:$c" htb rate 100kbit ceil "$LINK" \
      quantum 1514 prio 0
    $tc qdisc add dev "$DEV" parent "1:$c" handle "$c:" pfifo limit 1000
    $tc filter add dev "$DEV" parent 1: protocol ip prio 1 u32 \
      match ip dport "50$c" 0xffff flowid "1:$c"
  done
}

reserve() { # reserve ARGS... (json out)
  ip netns exec "$S" "$BRAID" reserve --broker http://127.0.0.1:7085 --token "$TOKEN" \
    --format json "$@"
}

# flow NAME PORT RESERVED SENT CLASS FROM TO: one flow on its own reservation.
flow() {
  local name=$1 port=$2 reserved=$3 sent=$4 class=$5 from=$6 to=$7
  until_seed "$from"
  ip netns exec "$R" "$BRAID" recv --listen "$RA:$port" --insecure --no-progress \
    -o /dev/null 2>"$OUT/recv-$name.log" &
  echo $! >"$OUT/recv-$name.pid"
  local flowarg=()
  [ "$ENFORCE" = broker ] && flowarg=(--flow "dst=$RA,proto=tcp,dport=$port")
  local id
  id=$(reserve create --resource premium --rate "$reserved" --class "$class" \
    --duration "$(python3 -c "print(int(($to - $from) * $SCALE) + 120)")s" --commit \
    "${flowarg[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
  echo "1:${port#50}" >"$OUT/class-$id"
  echo "$(python3 -c "import time; print(round(time.time() - $(cat "$OUT/t0"), 2))") $name reservation $id $reserved" \
    >>"$OUT/timeline.log"
  local rate=()
  [ "$sent" != - ] && rate=(--rate "$sent")
  for _ in $(seq 100); do
    ip netns exec "$R" ss -ltnH "sport = :$port" | grep -q . && break
    sleep 0.05
  done
  # The input ends at the flow's end: the sender sends what it read and stops.
  timeout "$(python3 -c "print(($to - $from) * $SCALE)")" cat /dev/zero |
    ip netns exec "$S" "$BRAID" send --to "$RA:$port" -n 1 --insecure --no-progress \
      --broker http://127.0.0.1:7085 --token "$TOKEN" --reservation "$id" "${rate[@]}" \
      --block-size 64KiB --stats-file "$OUT/stats-$name.json" 2>"$OUT/send-$name.log" || true
  reserve cancel "$id" >/dev/null || true
  echo "$(python3 -c "import time; print(round(time.time() - $(cat "$OUT/t0"), 2))") $name cancelled $id" \
    >>"$OUT/timeline.log"
}

trap cleanup EXIT
if "$BRAID" broker --help | grep -q -- --enforce && [ -z "${NO_ENFORCE:-}" ]; then
  ENFORCE=broker
else
  ENFORCE=script
fi
rm -rf "$OUT"
mkdir -p "$OUT"
setup
{
  printf 'secret = "%s"\n' "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  printf '[[resource]]\nname = "premium"\nkind = "network"\ncapacity = "%s"\n' "$PREMIUM"
  if [ "$ENFORCE" = broker ]; then
    printf 'device = "%s"\nlink = "%s"\n' "$DEV" "$LINK"
  fi
} >"$OUT/broker.toml"
enforce_flag=()
[ "$ENFORCE" = broker ] && enforce_flag=(--enforce)
ip netns exec "$S" "$BRAID" broker --config "$OUT/broker.toml" --listen 127.0.0.1:7085 \
  --db "$OUT/broker.db" "${enforce_flag[@]}" 2>"$OUT/broker.log" &
TOKEN=$("$BRAID" broker token --config "$OUT/broker.toml" --user bench --role user --ttl 1d)
for _ in $(seq 100); do
  ip netns exec "$S" bash -c 'exec 3<>/dev/tcp/127.0.0.1/7085' 2>/dev/null && break
  sleep 0.1
done
ip netns exec "$R" iperf3 -s -D -1 >/dev/null 2>&1
python3 -c 'import time; print(time.time())' >"$OUT/t0"
if [ "$ENFORCE" = script ]; then
  reserve watch | python3 "$HERE/bench-fig5.py" classes "$OUT" "$S" "$DEV" &
fi
python3 "$HERE/bench-fig5.py" sample "$OUT" "$S" "$DEV" &
sampler=$!
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

flow bg 5011 1mbit - background 0 185 &
bgjob=$!
(
  until_seed 3
  ip netns exec "$S" iperf3 -c "$RA" -u -b 80M -l 1000 -t "$(python3 -c "print(int(192 * $SCALE))")" \
    >"$OUT/iperf3.log" 2>&1 || true
) &
flood=$!
flow fg1 5012 36mbit 32mbit foreground 25 48
flow fg2 5013 9mbit 8mbit foreground 75 105
flow fg3 5014 18mbit 16mbit foreground 130 160
wait "$bgjob" || true
wait "$flood" || true
until_seed 195
kill "$sampler" 2>/dev/null || true
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$OUT" "$SCALE" "$ENFORCE" "$TRIM" "$load_before" "$load_after" "$(mbit "$LINK")" \
  "$(mbit "$PREMIUM")" <<'EOF'
import json, os, sys
out, scale, enforce, trim, lb, la, link, premium = sys.argv[1:9]
rows = open(os.path.join(out, "samples.csv")).read().splitlines()[1:]
classes = sorted({r.split(",")[1] for r in rows if r.split(",")[1].startswith("class ")})
if enforce == "broker":
    be = "class bd:ffff"
    prem = [c for c in classes if c not in ("class bd:1", be)]
else:
    be = "class 1:20"
    prem = ["class 1:11", "class 1:12", "class 1:13", "class 1:14"]
senders = []
for name in ("bg", "fg1", "fg2", "fg3"):
    try:
        s = json.load(open(os.path.join(out, f"stats-{name}.json")))
        senders.append({"name": name, "mbit": s.get("bps", 0) / 1e6, "bytes": s.get("bytes", 0)})
    except (OSError, ValueError):
        senders.append({"name": name, "error": "no stats"})
json.dump({
    "scale": float(scale), "enforcement": enforce, "trim": float(trim),
    "load_before": lb, "load_after": la, "link_mbit": float(link), "premium_mbit": float(premium),
    "bg_start": 0, "bg_end": 185, "end": 195,
    "foreground": [{"name": "fg1", "reserved": 36, "sent": 32},
                   {"name": "fg2", "reserved": 9, "sent": 8},
                   {"name": "fg3", "reserved": 18, "sent": 16}],
    "names": {"premium": prem, "be": be,
              "bg_class": "class 1:11" if enforce == "script" else None},
    "senders": senders,
}, open(os.path.join(out, "run.json"), "w"), indent=1)
print(f"enforcement: {enforce}; load before {lb}, after {la}")
EOF
python3 "$HERE/bench-fig5.py" report "$OUT"
