#!/usr/bin/env bash
# IQ-RUDP over an emulated wide-area link (issue 11, docs/bench-rudp.md
# "Wide-area links"): 20 Mbit/s, 50 ms one-way delay (RTT 100 ms), loss on
# the sender -> receiver direction, built by `testbed/netns.sh up NAME
# 20mbit/50ms[/LOSS]` on `braid emulate`. Run as root from the repo root
# after `cargo build --release -p braid-cli`.
#
#   bench-rudp-wan.sh alone   one flow at a time per loss rate (LOSSES):
#                             braid perf RUDP (NewReno, then CUBIC), iperf3
#                             TCP CUBIC, iperf3 TCP bbr; Mathis beside them
#   bench-rudp-wan.sh share   RUDP and one TCP flow at once (CUBIC, then
#                             bbr), per-second goodput, Jain's index
#   bench-rudp-wan.sh all     both
#
# Environment: BRAID (binary, default target/release/braid), DUR (seconds
# per alone flow, default 60), SHARE (seconds per shared run, default 120),
# LOSSES (default "0 0.1% 1%"), REPS (default 1), OUT (raw files, default
# /tmp/bench-rudp-wan), NAME (testbed name, default rudpwan).
set -euo pipefail
export BRAID=${BRAID:-target/release/braid}
DUR=${DUR:-60}
SHARE=${SHARE:-120}
LOSSES=${LOSSES:-0 0.1% 1%}
REPS=${REPS:-1}
OUT=${OUT:-/tmp/bench-rudp-wan}
NAME=${NAME:-rudpwan}
T=testbed/netns.sh
export BT_OWNER=$$
mkdir -p "$OUT"
SERVERS=()
cleanup() {
  for p in "${SERVERS[@]}"; do kill "$p" 2>/dev/null || true; done
  bash $T down "$NAME" >/dev/null 2>&1 || true
}
trap cleanup EXIT
S="bash $T exec $NAME s"
R="bash $T exec $NAME r"
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "# $(date -u) nproc=$(nproc) kernel $(uname -r); $(iperf3 --version | head -1)"

# Builds the channel and starts the servers. TCP's congestion control is
# named per flow (iperf3 -C, TCP_CONGESTION as root): in a network namespace
# other than the host's, the sysctl default can only be set to an algorithm
# in net.ipv4.tcp_allowed_congestion_control (here "reno bbr").
up() { # channel spec
  bash $T down "$NAME" >/dev/null 2>&1 || true
  bash $T up "$NAME" "$1" >/dev/null
  $R "$BRAID" perf server --listen 198.18.1.2:7401 --format json > "$OUT/srv-$2.txt" 2>&1 &
  SERVERS=($!)
  $R iperf3 -s -p 5201 > /dev/null 2>&1 &
  SERVERS+=($!)
  sleep 0.5
}
down() {
  for p in "${SERVERS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  SERVERS=()
  bash $T down "$NAME" >/dev/null 2>&1 || true
}

rudp() { # tag cc seconds
  $S "$BRAID" perf client --to 198.18.1.2:7401 --duration "$3s" --congestion "$2" --format json > "$OUT/$1.json"
}
tcp() { # tag cc seconds
  $S iperf3 -c 198.18.1.2 -p 5201 -C "$2" -t "$3" -i 1 -J > "$OUT/$1.json"
}

alone() {
  for loss in $LOSSES; do
    local spec=20mbit/50ms tag=l${loss%\%}
    [[ $loss != 0 ]] && spec=$spec/$loss
    for r in $(seq "$REPS"); do
      up "$spec" "$tag-$r"
      echo "## alone $spec rep $r (${DUR} s per flow)"
      for f in rudp:newreno rudp:cubic tcp:cubic tcp:bbr; do
        local kind=${f%%:*} cc=${f#*:}
        echo "load before $kind-$cc: $(load)"
        $kind "$tag-$r-$kind-$cc" "$cc" "$DUR"
      done
      down
      python3 - "$OUT" "$tag-$r" "$loss" <<'PY'
import json, math, sys
out, tag, loss = sys.argv[1], sys.argv[2], sys.argv[3]
p = float(loss.rstrip('%')) / 100
def rudp(cc):
    s = json.loads(open(f"{out}/{tag}-rudp-{cc}.json").read().strip().splitlines()[-1])
    return s["goodput_mbps"], s["goodput_with_drain_mbps"], s["loss_pct"], s["rtt_ms"]
def tcp(cc):
    j = json.load(open(f"{out}/{tag}-tcp-{cc}.json"))
    e = j["end"]
    assert e["sender_tcp_congestion"] == cc, e["sender_tcp_congestion"]
    return e["sum_received"]["bits_per_second"] / 1e6, e["sum_sent"]["retransmits"]
# Mathis: MSS/RTT * C/sqrt(p), C = sqrt(3/2) ~ 1.22, RTT = 100 ms (the
# base RTT; at these loss rates the window is far below the BDP, so the
# queue stays nearly empty). MSS: TCP 1448 B (1500 MTU, timestamps),
# RUDP 1400 B (its datagram; the stream payload is ~2 % less).
def mathis(mss):
    return mss * 8 / 0.1 * math.sqrt(1.5) / math.sqrt(p) / 1e6 if p > 0 else float("inf")
for cc in ("newreno", "cubic"):
    g, gd, l, rtt = rudp(cc)
    print(f"rudp {cc:8} goodput {g:6.2f} Mbit/s (with drain {gd:6.2f})  loss {l:5.2f} %  rtt {rtt:6.1f} ms  "
          f"mathis(1400) {mathis(1400):6.2f}  ratio {g / mathis(1400):5.2f}")
for cc in ("cubic", "bbr"):
    g, rx = tcp(cc)
    print(f"tcp  {cc:8} goodput {g:6.2f} Mbit/s  retransmits {rx:6d}  "
          f"mathis(1448) {mathis(1448):6.2f}  ratio {g / mathis(1448):5.2f}")
PY
    done
  done
}

share() {
  for cc in cubic bbr; do
    for r in $(seq "$REPS"); do
      up 20mbit/50ms "share-$cc-$r"
      echo "## shared 20mbit/50ms, RUDP (NewReno) + TCP $cc, ${SHARE} s, rep $r, load: $(load)"
      local tag="$OUT/share-$cc-$r"
      $S iperf3 -c 198.18.1.2 -p 5201 -C "$cc" -t "$SHARE" -i 1 -J > "$tag-tcp.json" &
      local ip=$!
      rudp "share-$cc-$r-rudp" newreno "$SHARE"
      wait $ip
      echo "load after: $(load)"
      down
      python3 - "$tag-rudp.json" "$tag-tcp.json" "$SHARE" <<'PY'
import json, sys
# Mean per-second goodput over seconds 10 .. SHARE-10, where both flows
# run and the start-up transient is over; Jain over those means.
share = float(sys.argv[3]); lo, hi = 10, share - 10
lines = [json.loads(l) for l in open(sys.argv[1]).read().strip().splitlines()]
ri = [l["goodput_mbps"] for l in lines if "from_s" in l and lo <= l["from_s"] and l["to_s"] <= hi + 0.5]
ti = [i["sum"]["bits_per_second"] / 1e6 for i in json.load(open(sys.argv[2]))["intervals"]
      if lo <= i["sum"]["start"] and i["sum"]["end"] <= hi + 0.5]
r = sum(ri) / len(ri); t = sum(ti) / len(ti)
jain = (r + t) ** 2 / (2 * (r * r + t * t))
# Jain per 10 s window, to show whether the split converges or oscillates.
win = []
for k in range(0, min(len(ri), len(ti)) - 9, 10):
    a = sum(ri[k:k + 10]) / 10; b = sum(ti[k:k + 10]) / 10
    win.append("%.1f/%.1f" % (a, b))
print("shared (s %d-%d, %d/%d samples): rudp %.2f Mbit/s, tcp %.2f Mbit/s, sum %.2f; Jain %.3f"
      % (lo, hi, len(ri), len(ti), r, t, r + t, jain))
print("  10 s means rudp/tcp: " + " ".join(win))
PY
    done
  done
}

case "${1:-all}" in
  alone) alone;;
  share) share;;
  all) alone; share;;
  *) echo "usage: bench-rudp-wan.sh alone|share|all" >&2; exit 2;;
esac
