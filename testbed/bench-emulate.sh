#!/usr/bin/env bash
# Fidelity and throughput of `braid emulate` (issue 11 §1; docs/emulate.md).
#
#   testbed/bench-emulate.sh [SECTION...]     (default: all of them)
#
# Sections:
#   throughput  iperf3 TCP and UDP (1472-byte datagrams = 1500-byte IP
#               packets) through an emulated 10gbit link with no delay, one
#               direction then both at once, beside a plain veth pair (no
#               qdisc, offloads off like the testbed's) in the same run
#   rate        delivered IP rate at 10, 100, 500 Mbit/s from UDP offered at
#               1.3x the rate, emulated vs tbf (netns.sh's) in the same run
#   trace       correlation at 1 s bins between a trace's rate and the rate
#               delivered to saturating UDP, for a mahimahi and a 5G trace
#   delay       one-way delay p50/p99 of 1000 probes/s at 100 Mbit/s with
#               10/50/150 ms configured, under 50 Mbit/s of UDP load, and
#               with a full queue (UDP at 150 Mbit/s)
#   loss        loss of 200k probes at 0.1 %, 1 %, 5 % against the binomial
#               99 % interval; the 1 % run again with the same seed and with
#               another one
#   alloc       malloc calls of the pump threads (perf uprobe) while they
#               move ~80 Mbit/s, and where the emulator's CPU goes (perf)
#
# Environment: RT (emulators run with --realtime RT), BRAID (default target/release/braid), BT_OWNER (default $$),
# OUT (results directory, default /tmp/bench-emulate.<date>), SECS (seconds
# per throughput/rate point, default 10), TRACE_SECS (default 90). Needs
# root, iproute2, iperf3, python3, perf (alloc only). Every result line
# carries the load average at its start; all TCP runs say their congestion
# control (the namespace default here is bbr).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
export BT_OWNER=${BT_OWNER:-$$}
export BRAID=${BRAID:-$ROOT/target/release/braid}
OUT=${OUT:-/tmp/bench-emulate.$(date -u +%Y%m%dT%H%M%S)}
SECS=${SECS:-10}
TRACE_SECS=${TRACE_SECS:-90}
DATA=${DATA:-$ROOT/../shared/data}
NAME=emufid
NB="$HERE/netns.sh"
PROBE="$HERE/udp-probe.py"
S="bt${BT_OWNER}-${NAME}-s"
R="bt${BT_OWNER}-${NAME}-r"
STATE="/run/braid-testbed/bt${BT_OWNER}-${NAME}"
mkdir -p "$OUT"
LOG="$OUT/results.txt"
# RT=PRIO runs every emulator with --realtime PRIO (netns.sh starts braid
# through this wrapper).
if [[ -n ${RT:-} ]]; then
  printf '#!/bin/sh\nexec %q "$@" --realtime %q\n' "$BRAID" "$RT" >"$OUT/braid-rt"
  chmod +x "$OUT/braid-rt"
  BRAID="$OUT/braid-rt"
fi

cleanup() {
  [[ -n ${EMU_PID:-} ]] && kill "$EMU_PID" 2>/dev/null || true
  "$NB" down "$NAME" 2>/dev/null || true
}
trap cleanup EXIT

say() { echo "$*" | tee -a "$LOG"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
xs() { ip netns exec "$S" "$@"; }
# Starts a one-shot iperf3 server in R and waits until it listens.
iperf_server() {
  for _ in $(seq 100); do  # the last one-shot server may still be closing
    xr ss -Hltn 'sport = :5201' | grep -q . || break
    sleep 0.05
  done
  xr iperf3 -s -1 -D -p 5201
  for _ in $(seq 100); do
    xr ss -Hltn 'sport = :5201' | grep -q . && return 0
    sleep 0.05
  done
}
xr() { ip netns exec "$R" "$@"; }

header() {
  say "# bench-emulate $1: $(date -u +%FT%TZ), nproc $(nproc), $(uname -r), braid $BRAID${RT:+ (--realtime $RT)}"
  say "#   tcp cc s=$(xs sysctl -n net.ipv4.tcp_congestion_control 2>/dev/null || echo ?) r=$(xr sysctl -n net.ipv4.tcp_congestion_control 2>/dev/null || echo ?)"
}

# iperf3 once: LABEL ADDR ARGS... -> one result line (receiver's rates).
iperf() {
  local label=$1 addr=$2; shift 2
  local l; l=$(load)
  iperf_server
  local j="$OUT/iperf-${label// /_}.json"
  # What the devices received (IP bytes), independent of iperf3's receiver.
  local ch=${addr#198.18.}; ch=${ch%%.*}
  local fr="$OUT/iperf-${label// /_}.r.counts" fs="$OUT/iperf-${label// /_}.s.counts"
  xr python3 "$PROBE" devcount --dev "r$ch" --seconds "$SECS" >"$fr" &
  local d1=$!
  xs python3 "$PROBE" devcount --dev "s$ch" --seconds "$SECS" >"$fs" &
  local d2=$!
  xs iperf3 -c "$addr" -p 5201 -t "$SECS" -J "$@" >"$j" 2>/dev/null || true
  wait "$d1" "$d2"
  sleep 0.3
  local l2=0; [[ $label == veth* ]] && l2=14
  local dr ds
  dr=$(python3 "$PROBE" rate "$fr" --skip 1 --seconds $((SECS - 2)) --l2 "$l2" | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["ip_mbps"]/1000, 3))')
  ds=$(python3 "$PROBE" rate "$fs" --skip 1 --seconds $((SECS - 2)) --l2 "$l2" | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["ip_mbps"]/1000, 3))')
  python3 - "$j" "$label" "$l" <<'EOF' | tee -a "$LOG"
import json, sys
j = json.load(open(sys.argv[1])); label, l = sys.argv[2], sys.argv[3]
e = j.get("end", {})
if "error" in j:
    print(f"{label}: iperf3 error {j['error']} (load {l})"); sys.exit()
parts = []
if "sum_received" in e:                       # TCP
    parts.append(f"recv {e['sum_received']['bits_per_second']/1e9:.3f} Gbit/s")
    if "sum_received_bidir_reverse" in e:
        parts.append(f"reverse {e['sum_received_bidir_reverse']['bits_per_second']/1e9:.3f} Gbit/s")
    parts.append(f"retr {e.get('sum_sent', {}).get('retransmits', '?')}")
    cc = e.get("sender_tcp_congestion", "?")
    parts.append(f"cc {cc}")
else:                                          # UDP
    s = e["sum"]
    parts.append(f"offered {s['bits_per_second']/1e9:.3f} Gbit/s")
    # receiver rate = delivered datagrams / time
    recv = (s["packets"] - s["lost_packets"]) * j["start"]["test_start"]["blksize"] * 8 / s["seconds"]
    parts.append(f"recv {recv/1e9:.3f} Gbit/s (UDP payload; IP = x1500/1472)")
    parts.append(f"lost {s['lost_percent']:.1f}%")
    if "sum_bidir_reverse" in e:
        r = e["sum_bidir_reverse"]
        rr = (r["packets"] - r["lost_packets"]) * j["start"]["test_start"]["blksize"] * 8 / r["seconds"]
        parts.append(f"reverse recv {rr/1e9:.3f} Gbit/s lost {r['lost_percent']:.1f}%")
cpu = e.get("cpu_utilization_percent", {})
if cpu:
    parts.append(f"cpu host {cpu.get('host_total', 0):.0f}% remote {cpu.get('remote_total', 0):.0f}%")
print(f"{label}: " + ", ".join(parts) + f" (load {l})")
EOF
  say "  IP delivered to the devices (from 1 s to $((SECS - 1)) s): a>b $dr Gbit/s, b>a $ds Gbit/s"
}

# CPU seconds (user+sys) used by the threads of PID so far.
cpu_of() {
  local pid=$1 t=0 f
  for f in /proc/"$pid"/task/*/stat; do
    # Fields after the "(comm)", which may hold spaces: utime is the 12th.
    t=$(( t + $(sed 's/.*) //' "$f" | awk '{print $12 + $13}') ))
  done
  echo "$t"
}

emu_pid() { cat "$STATE/ch$1.pid"; }
# Waits until the probe receiver has bound its socket.
wait_ready() {
  for _ in $(seq 200); do [[ -e $OUT/ready ]] && return 0; sleep 0.05; done
  echo "bench-emulate: the probe receiver did not start" >&2; exit 1
}

sec_throughput() {
  "$NB" up "$NAME" 10gbit/0ms 10gbit
  tc -n "$S" qdisc del dev s2 root
  header throughput
  say "# ch1 = braid emulate --rate 10gbit (TUN, no offloads possible); ch2 = plain veth (tso/gso off on the sender side, no qdisc)"
  local pid c0 c1 hz; pid=$(emu_pid 1); hz=$(getconf CLK_TCK)
  for ch in 1 2; do
    local what; [[ $ch == 1 ]] && what=emulated || what=veth
    c0=$(cpu_of "$pid")
    iperf "$what tcp a>b" "198.18.$ch.2"
    c1=$(cpu_of "$pid"); [[ $ch == 1 ]] && say "  emulator CPU during it: $(( (c1 - c0) * 100 / hz / SECS ))% of one core"
    iperf "$what udp a>b 1472B offered 2G" "198.18.$ch.2" -u -b 2G -l 1472
    iperf "$what udp a>b 1472B offered 1G" "198.18.$ch.2" -u -b 1G -l 1472
    c0=$(cpu_of "$pid")
    iperf "$what tcp bidir" "198.18.$ch.2" --bidir
    c1=$(cpu_of "$pid"); [[ $ch == 1 ]] && say "  emulator CPU during it: $(( (c1 - c0) * 100 / hz / SECS ))% of one core"
    iperf "$what udp bidir 1472B offered 1G each" "198.18.$ch.2" -u -b 1G -l 1472 --bidir
  done
  "$NB" down "$NAME"
}

# devcount in R on DEV for SECONDS into FILE (background; sets DC_PID).
devcount() {
  xr python3 "$PROBE" devcount --dev "$1" --seconds "$2" --interval 0.1 >"$3" &
  DC_PID=$!
}

sec_rate() {
  local rate mbit
  for mbit in 10 100 500; do
    rate=${mbit}mbit
    "$NB" up "$NAME" "$rate/0ms" "$rate"
    [[ $mbit == 10 ]] && header rate
    local offer=$(( mbit * 13 / 10 ))M
    for ch in 1 2; do
      local what l2; if [[ $ch == 1 ]]; then what=emulated; l2=0; else what=tbf; l2=14; fi
      local f="$OUT/rate-$mbit-$what.counts" l; l=$(load)
      devcount "r$ch" $((SECS + 3)) "$f"
      sleep 0.5
      iperf_server
      xs iperf3 -c "198.18.$ch.2" -p 5201 -u -b "$offer" -l 1472 -t $((SECS + 2)) >/dev/null 2>&1 || true
      wait "$DC_PID"
      local r; r=$(python3 "$PROBE" rate "$f" --skip 2 --seconds "$SECS" --l2 "$l2")
      python3 - "$r" "$mbit" "$what" "$offer" "$l" <<'EOF' | tee -a "$LOG"
import json, sys
r = json.loads(sys.argv[1]); mbit = float(sys.argv[2]); what = sys.argv[3]
ip = r["ip_mbps"]
print(f"rate {mbit:g} Mbit/s {what}: IP {ip:.3f} Mbit/s ({100*(ip/mbit-1):+.2f}%), "
      f"device-counted {r['device_mbps']:.3f} Mbit/s, {r['packets']} packets in {r['seconds']:g} s, "
      f"UDP offered {sys.argv[4]}bit/s (load {sys.argv[5]})")
EOF
    done
    "$NB" down "$NAME"
  done
}

sec_trace() {
  local t name
  for t in "$DATA/traces/mahimahi/TMobile-LTE-driving.down" \
           "$DATA/traces/5g_ireland/Download_Static_B_2020.02.14_13.21.26.csv.tsv"; do
    name=$(basename "$t")
    "$NB" up "$NAME" "trace:$t/0ms"
    [[ $t == *mahimahi* ]] && header trace
    local epoch; epoch=$(sed -n 's/.*model time zero at CLOCK_MONOTONIC \([0-9]*\) ns.*/\1/p' "$STATE/ch1.log")
    local f="$OUT/trace-$name.counts" l; l=$(load)
    devcount r1 $((TRACE_SECS + 2)) "$f"
    iperf_server
    # Saturating: above the trace's peak 1 s rate.
    local offer=60M; [[ $t == *5g* ]] && offer=330M
    xs iperf3 -c 198.18.1.2 -p 5201 -u -b "$offer" -l 1472 -t $((TRACE_SECS + 1)) >/dev/null 2>&1 || true
    wait "$DC_PID"
    say "trace $name (UDP offered ${offer}bit/s, load $l): $(python3 "$PROBE" corr "$f" --trace "$t" --epoch "$epoch" --bin 1 --seconds "$TRACE_SECS" --skip 1 --dump "$OUT/trace-$name.bins.tsv")"
    "$NB" down "$NAME"
  done
}

probe_owd() { # label bg_offer(or -)
  local label=$1 bg=$2 l; l=$(load)
  if [[ $bg != - ]]; then
    iperf_server
    xs iperf3 -c 198.18.1.2 -p 5201 -u -b "$bg" -l 1472 -t 14 >"$OUT/owd-load.txt" 2>&1 &
    sleep 2
  fi
  rm -f "$OUT/ready"
  xr python3 "$PROBE" recv --bind 198.18.1.2:7000 --seconds 16 --ready "$OUT/ready" >"$OUT/owd.json" &
  local rp=$!
  wait_ready
  xs python3 "$PROBE" send --to 198.18.1.2:7000 --pps 1000 --size 100 --seconds 10 >/dev/null
  wait "$rp"
  wait || true
  say "delay $label (load $l): $(cat "$OUT/owd.json")"
}

sec_delay() {
  BT_QUEUE=100ms "$NB" up "$NAME" 100mbit/10ms
  header delay
  for d in ${DELAYS:-10ms 50ms 150ms}; do
    "$NB" set "$NAME" 1 delay "$d"
    sleep 0.5
    probe_owd "100mbit/$d, 50 Mbit/s UDP load" 50M
  done
  "$NB" set "$NAME" 1 delay 50ms
  probe_owd "100mbit/50ms, full 100 ms queue (150 Mbit/s UDP)" 150M
  "$NB" down "$NAME"
}

# One loss run: LABEL LOSS SEED -> probe result + the emulator's own count.
loss_run() {
  local label=$1 loss=$2 seed=$3 l n=200000
  "$NB" up "$NAME"
  for ns in "$S" "$R"; do
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  done
  "$BRAID" emulate --ns-a "$S" --ns-b "$R" --dev-a s1 --dev-b r1 \
    --addr-a 198.18.1.1/24 --addr-b 198.18.1.2/24 --rate 100mbit \
    --loss "$loss" --back-loss 0 --seed "$seed" 2>"$OUT/loss-emu.log" &
  EMU_PID=$!
  for _ in $(seq 100); do xr ip addr show dev r1 2>/dev/null | grep -q 198.18.1.2 && break; sleep 0.05; done
  l=$(load)
  rm -f "$OUT/ready"
  xr python3 "$PROBE" recv --bind 198.18.1.2:7000 --seconds 60 --expect "$n" --loss "$(python3 -c "print(float('${loss%\%}')/100)")" --ready "$OUT/ready" >"$OUT/loss.json" &
  local rp=$!
  wait_ready
  xs python3 "$PROBE" send --to 198.18.1.2:7000 --pps 20000 --size 100 --count "$n" >"$OUT/loss-send.json"
  wait "$rp"
  local txdrop; txdrop=$(xs cat /sys/class/net/s1/statistics/tx_dropped)
  local rcvbuf; rcvbuf=$(xr awk '/^Udp:/{if (h) print "NoPorts " $3 ", RcvbufErrors " $6; h=1}' /proc/net/snmp)
  kill "$EMU_PID"; wait "$EMU_PID" || true; EMU_PID=
  say "loss $label seed $seed (load $l): $(cat "$OUT/loss.json") sender $(cat "$OUT/loss-send.json") sender's TUN tx_dropped $txdrop (never read: the emulator was not scheduled in time), receiver UDP $rcvbuf; emulator: $(grep -o 'a>b delivered.*lost;' "$OUT/loss-emu.log")"
  "$NB" down "$NAME"
}

sec_loss() {
  "$NB" up "$NAME"; header loss; "$NB" down "$NAME"
  loss_run 0.1% 0.1% 1
  loss_run 1% 1% 1
  loss_run 5% 5% 1
  loss_run "1% again" 1% 1
  loss_run "1% other seed" 1% 2
}

sec_alloc() {
  "$NB" up "$NAME" 100mbit/10ms
  header alloc
  local pid; pid=$(emu_pid 1)
  local libc; libc=$(ldd "$BRAID" | awk '/libc.so/{print $3}')
  perf probe -q -d 'probe_libc:*' 2>/dev/null || true
  perf probe -q -x "$libc" malloc >/dev/null
  iperf_server
  xs iperf3 -c 198.18.1.2 -p 5201 -u -b 80M -l 1472 -t 14 >/dev/null 2>&1 &
  sleep 3   # warm: the pool and the delay line have grown to their peak
  local p0; p0=$(xr cat /sys/class/net/r1/statistics/rx_packets)
  perf stat --per-thread -e probe_libc:malloc -p "$pid" -o "$OUT/alloc.txt" -- sleep 8
  local p1; p1=$(xr cat /sys/class/net/r1/statistics/rx_packets)
  wait || true
  perf probe -q -d 'probe_libc:*' || true
  say "alloc (load $(load)): $((p1 - p0)) packets delivered to r1 in 8 s; malloc calls per thread:"
  grep -E 'emulate|braid' "$OUT/alloc.txt" | tee -a "$LOG"
  # Profile at full speed: where the CPU goes.
  "$NB" set "$NAME" 1 rate 10gbit
  "$NB" set "$NAME" 1 delay 0ms
  iperf_server
  xs iperf3 -c 198.18.1.2 -p 5201 -u -b 2G -l 1472 -t 8 >/dev/null 2>&1 &
  sleep 2
  perf record -q -g -o "$OUT/perf.data" -p "$pid" -- sleep 4 >/dev/null 2>&1
  wait || true
  say "perf profile of the emulator at full UDP speed (self time, top 15):"
  perf report -i "$OUT/perf.data" --no-children --sort sym --stdio 2>/dev/null \
    | grep -E '^ +[0-9.]+%' | head -15 | tee -a "$LOG"
  say "user-space malloc/free/realloc symbols in the profile: $(perf report -i "$OUT/perf.data" --no-children --sort sym --stdio 2>/dev/null | grep -E '^ +[0-9.]+% +\[\.\]' | grep -ciE 'malloc|free|realloc|alloc::' || true) (kernel skb allocation is the kernel's)"
  say "samples by object: $(perf report -i "$OUT/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9.]+%' | awk '{printf "%s %s; ", $2, $1}')"
  "$NB" down "$NAME"
}

sections=("$@")
[[ ${#sections[@]} -gt 0 ]] || sections=(throughput rate trace delay loss alloc)
"$NB" check >/dev/null || { echo "bench-emulate: needs root and ip netns" >&2; exit 1; }
for s in "${sections[@]}"; do "sec_$s"; done
echo "results in $LOG"
