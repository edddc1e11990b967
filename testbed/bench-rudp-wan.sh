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
#   bench-rudp-wan.sh share   RUDP and one TCP flow at once (PAIRS of RUDP
#                             controller:TCP controller, default NewReno and
#                             CUBIC each against TCP CUBIC and bbr, and the
#                             kernel's own tcp-reno:cubic as a reference),
#                             per-second goodput, Jain's index
#   bench-rudp-wan.sh table1  seed 002 Table 1 on the emulated link: frames
#                             at 30/s with sizes from a real video trace,
#                             18 Mbit/s CBR UDP cross traffic (iperf3), over
#                             TCP CUBIC, TCP bbr, RUDP NewReno, RUDP CUBIC
#                             (each also with --autotune; T1ROWS):
#                             throughput, inter-arrival mean/sd, latency
#   bench-rudp-wan.sh all     alone, share, table1
#
# Environment: BRAID (binary, default target/release/braid), DUR (seconds
# per alone flow, default 60), SHARE (seconds per shared run, default 120),
# LOSSES (default "0 0.1% 1%"), REPS (default 1), OUT (raw files, default
# /tmp/bench-rudp-wan), NAME (testbed name, default rudpwan); table1: T1DUR
# (default 60), T1CH (channel, default 20mbit/50ms), T1MEAN (mean offered
# frame load, default 4800kbit), T1CROSS (default 18M), DATA (default
# ../shared/data).
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
  $R "$BRAID" perf server --open --listen 198.18.1.2:7401 --format json > "$OUT/srv-$2.txt" 2>&1 &
  SERVERS=($!)
  $R iperf3 -s -p 5201 > /dev/null 2>&1 &
  SERVERS+=($!)
  $R iperf3 -s -p 5202 > /dev/null 2>&1 &
  SERVERS+=($!)
  sleep 0.5
}
down() {
  for p in "${SERVERS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  SERVERS=()
  bash $T down "$NAME" >/dev/null 2>&1 || true
}

rudp() { # tag cc seconds
  $S "$BRAID" perf client --open --to 198.18.1.2:7401 --duration "$3s" --congestion "$2" --format json > "$OUT/$1.json"
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
  for pair in ${PAIRS:-newreno:cubic cubic:cubic tcp-reno:cubic newreno:bbr cubic:bbr}; do
    local rcc=${pair%%:*} cc=${pair#*:}
    for r in $(seq "$REPS"); do
      up 20mbit/50ms "share-$rcc-$cc-$r"
      echo "## shared 20mbit/50ms, RUDP $rcc + TCP $cc, ${SHARE} s, rep $r, load: $(load)"
      local tag="$OUT/share-$rcc-$cc-$r"
      $S iperf3 -c 198.18.1.2 -p 5201 -C "$cc" -t "$SHARE" -i 1 -J > "$tag-tcp.json" &
      local ip=$!
      if [[ $rcc == tcp-* ]]; then
        # Reference pair: a kernel TCP flow (e.g. tcp-reno) in RUDP's place.
        $S iperf3 -c 198.18.1.2 -p 5202 -C "${rcc#tcp-}" -t "$SHARE" -i 1 -J > "$tag-rudp.json"
      else
        rudp "share-$rcc-$cc-$r-rudp" "$rcc" "$SHARE"
      fi
      wait $ip
      echo "load after: $(load)"
      down
      python3 - "$tag-rudp.json" "$tag-tcp.json" "$SHARE" <<'PY'
import json, sys
# Mean per-second goodput over seconds 10 .. SHARE-10, where both flows
# run and the start-up transient is over; Jain over those means.
share = float(sys.argv[3]); lo, hi = 10, share - 10
def iperf(path):
    return [i["sum"]["bits_per_second"] / 1e6 for i in json.load(open(path))["intervals"]
            if lo <= i["sum"]["start"] and i["sum"]["end"] <= hi + 0.5]
text = open(sys.argv[1]).read()
if text.lstrip().startswith("{\n"):
    ri = iperf(sys.argv[1])  # a TCP flow in RUDP's place
else:
    lines = [json.loads(l) for l in text.strip().splitlines()]
    ri = [l["goodput_mbps"] for l in lines if "from_s" in l and lo <= l["from_s"] and l["to_s"] <= hi + 0.5]
ti = iperf(sys.argv[2])
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

# Seed 002 Table 1 ("basic performance comparison"): the changing
# application (frames at a fixed rate, sizes from a trace; the seed's Mbone
# trace is not available, so a real video frame-size trace stands in) with
# 18 Mbit/s UDP cross traffic, per transport. The seed's columns: time,
# throughput (KB/s), inter-arrival and its deviation (jitter) at the
# receiver; here the test runs for a fixed time, so throughput replaces
# time, and the write-to-read latency is added.
table1() {
  local dur=${T1DUR:-60} ch=${T1CH:-20mbit/50ms} mean=${T1MEAN:-4800kbit} cross=${T1CROSS:-18M}
  local trace=${DATA:-../shared/data}/video/mmgc2019_live_sports/frame_trace_3
  [[ -f $trace ]] || { echo "table1: $trace missing" >&2; exit 2; }
  for r in $(seq "$REPS"); do
    up "$ch" "t1-$r"
    echo "## table1 $ch, frames 30/s from $(basename "$trace") at mean $mean, cross UDP $cross, ${dur} s per row, rep $r"
    for f in ${T1ROWS:-tcp:cubic tcp:bbr rudp:newreno rudp:cubic rudp:newreno:autotune rudp:cubic:autotune}; do
      local kind=${f%%:*} cc=${f#*:} auto=()
      [[ $cc == *:autotune ]] && { cc=${cc%:autotune}; auto=(--autotune); }
      local tag="$OUT/t1-$r-${f//:/-}"
      echo "load before $kind-$cc: $(load)"
      $S iperf3 -c 198.18.1.2 -p 5202 -u -b "$cross" -l 1470 -t $((dur + 4)) -J > "$tag-cross.json" &
      local ip=$!
      sleep 2
      local extra=(--congestion "$cc" "${auto[@]}")
      [[ $kind == tcp ]] && extra=(--transport tcp --tcp-congestion "$cc")
      $S "$BRAID" perf client --open --to 198.18.1.2:7401 --duration "${dur}s" --fps 30 \
        --frame-trace "$trace" --frame-mean "$mean" "${extra[@]}" --format json > "$tag.json"
      wait $ip || true
    done
    sleep 1  # the server prints its line once the last client closed
    down
    python3 - "$OUT" "$r" ${T1ROWS:-tcp:cubic tcp:bbr rudp:newreno rudp:cubic rudp:newreno:autotune rudp:cubic:autotune} <<'PY'
import json, sys
out, r = sys.argv[1], sys.argv[2]
srv = [json.loads(l) for l in open(f"{out}/srv-t1-{r}.txt") if l.startswith("{")]
rows = [a.replace(":", "-") for a in sys.argv[3:]]
print("%-22s %9s %9s %12s %9s %9s %9s %9s %9s" % ("row", "KB/s", "frames", "interarr s", "jitter s",
      "lat mean", "lat p50", "lat p99", "cross Mb"))
for name, s in zip(rows, srv):
    c = json.load(open(f"{out}/t1-{r}-{name}-cross.json"))["end"]["sum"]
    cross = c["bits_per_second"] * (1 - c["lost_percent"] / 100) / 1e6
    l = s["latency_ms"]
    print("%-22s %9.1f %9d %12.3f %9.3f %8.2fs %8.2fs %8.2fs %9.2f" % (
        name, s["bytes"] / s["seconds"] / 1e3, s["messages"], s["inter_arrival_ms"] / 1e3,
        s["inter_arrival_sd_ms"] / 1e3, l["mean"] / 1e3, l["p50"] / 1e3, l["p99"] / 1e3, cross))
PY
  done
}

case "${1:-all}" in
  alone) alone;;
  share) share;;
  table1) table1;;
  all) alone; share; table1;;
  *) echo "usage: bench-rudp-wan.sh alone|share|table1|all" >&2; exit 2;;
esac
