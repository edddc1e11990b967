#!/usr/bin/env bash
# Benchmarks of `braid send` / `braid recv` (issue 4; results in
# docs/bench-pipe.md). Needs root (network namespaces) and a release build:
#
#   cargo build --release -p braid-cli
#   testbed/bench-pipe.sh static   OUTDIR   # seed's static setups, all modes + MPTCP + 1 TCP
#   testbed/bench-pipe.sh dynamic  OUTDIR   # 100 + 200|300 Mbit/s, switching every 20 s
#   testbed/bench-pipe.sh loopback OUTDIR   # braid -n N vs iperf3 -P N on loopback
#   testbed/bench-pipe.sh wan      OUTDIR   # issue 11: RTT-heterogeneous, lossy and
#                                           # trace-driven channels (braid emulate)
#   testbed/bench-pipe.sh gbit     OUTDIR   # issue 11: seed's 2+1, 3+2+1 Gbit/s static and
#                                           # 1+2|3, 10+20|30 Gbit/s dynamic (tbf), iperf3 beside
#   testbed/bench-pipe.sh all      OUTDIR
#
# Every run appends one CSV line; testbed/bench-report.py turns OUTDIR into
# tables and the SVG. Environment: BRAID (binary), SECS (static run length,
# default 6), DYN_SECS (dynamic run length, default 80), REPS (loopback
# repetitions, default 3), SETUPS (static: any of A B C R), MODES (modes to
# run), REFS=0 (static: skip the MPTCP and single-TCP references),
# BRAID_B (loopback: a second binary run beside BRAID in every rep, label
# braid-b, for before/after comparisons in one run).
# gbit: GBIT_SETUPS (any of G2 G3 D1 D10), SECS, DYN_SECS.
# wan: WAN_SECS (run length, default 30), WAN_N (connections, default 4),
# WAN_SETUPS (any of W1 W2 W3 W4 T), REFS=mptcp (only the MPTCP
# reference, not one TCP per channel), TRACES (directory of the mahimahi
# traces, default /work/shared/data/traces/mahimahi).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
export BRAID=${BRAID:-$HERE/../target/release/braid}  # netns.sh runs it too
NETNS="bash $HERE/netns.sh"
SECS=${SECS:-6}
DYN_SECS=${DYN_SECS:-80}
REPS=${REPS:-3}
WAN_SECS=${WAN_SECS:-30}
WAN_N=${WAN_N:-4}
TRACES=${TRACES:-/work/shared/data/traces/mahimahi}
PORT=9000
export BT_OWNER=$$
what=${1:?static|dynamic|loopback|wan|all}
OUT=${2:?OUTDIR}
mkdir -p "$OUT"

# The pipe's security (issue 13): PIPE_SEC=key (default: a fresh key file in
# OUTDIR, encrypted), no-encrypt (the key, --no-encrypt) or insecure (clear
# text, no authentication: the old behaviour, for iperf3 comparisons).
"$BRAID" keygen "$OUT/pipe.key" >/dev/null 2>&1 || [ -f "$OUT/pipe.key" ]
case "${PIPE_SEC:-key}" in
  key) SEC=(--key "$OUT/pipe.key");;
  no-encrypt) SEC=(--key "$OUT/pipe.key" --no-encrypt);;
  insecure) SEC=(--insecure);;
  *) echo "PIPE_SEC must be key, no-encrypt or insecure" >&2; exit 2;;
esac
trap '$NETNS down bench >/dev/null 2>&1 || true; $NETNS clean >/dev/null 2>&1 || true' EXIT

{ echo "date: $(date -u +%FT%TZ)"; echo "nproc: $(nproc)";
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p')"; echo "kernel: $(uname -r)";
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> "$OUT/machine.txt"

wait_listen() { # ns-side port
  for _ in $(seq 300); do
    if $NETNS exec bench "$1" ss -ltnH 2>/dev/null | grep -q ":$2 "; then return 0; fi
    sleep 0.02
  done
  echo "receiver did not listen" >&2; return 1
}

bits() { local r=${1,,}; case "$r" in *gbit) echo $(( ${r%gbit} * 1000000000 ));;
  *mbit) echo $(( ${r%mbit} * 1000000 ));; esac; }

# one SETUP LABEL N BYTES SUMBITS "send args" "recv args"
one() {
  local setup=$1 label=$2 n=$3 bytes=$4 sum=$5 sargs=$6 rargs=$7
  local st="$OUT/last-recv.json"
  rm -f "$st"
  # shellcheck disable=SC2086
  timeout 300 $NETNS exec bench r "$BRAID" recv "${SEC[@]}" --no-progress -o /dev/null --idle-limit 3s \
    --stats-file "$st" $rargs &
  local rpid=$!
  wait_listen r $PORT
  # shellcheck disable=SC2086
  head -c "$bytes" /dev/zero | timeout 300 $NETNS exec bench s "$BRAID" send "${SEC[@]}" --no-progress \
    -n "$n" $sargs || true
  wait $rpid || true
  local bps=0
  [[ -s $st ]] && bps=$(python3 -c "import json;print(json.load(open('$st'))['bps'])")
  echo "$setup,$label,$n,$bps,$sum,$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$OUT/static.csv"
}

static_setup() { # NAME NMIN NMAX RATE... (fastest first)
  local name=$1 nmin=$2 nmax=$3; shift 3
  local rates=("$@") sum=0 to="" i
  $NETNS up bench "${rates[@]}"
  $NETNS mptcp bench
  for i in "${!rates[@]}"; do
    sum=$(( sum + $(bits "${rates[$i]}") ))
    to+="198.18.$((i + 1)).2:$PORT,"
  done
  to=${to%,}
  local bytes=$(( sum / 8 * SECS ))
  for n in $(seq "$nmin" "$nmax"); do
    for mode in ${MODES:-round-robin weighted adaptive}; do
      one "$name" "$mode" "$n" "$bytes" "$sum" "--mode $mode --to $to" "--listen $to"
    done
  done
  [[ ${REFS:-1} == 1 ]] || { $NETNS down bench; return 0; }
  one "$name" mptcp 1 "$bytes" "$sum" "--mptcp --to 198.18.1.2:$PORT" \
    "--mptcp --listen 0.0.0.0:$PORT"  # MP_JOINs arrive on every channel address
  one "$name" single-tcp 1 "$bytes" "$sum" "--to 198.18.1.2:$PORT" "--listen 198.18.1.2:$PORT"
  $NETNS down bench
}

run_static() {
  [[ -s $OUT/static.csv ]] || echo "setup,label,connections,bps,sum_bps,load" > "$OUT/static.csv"
  local s
  for s in ${SETUPS:-A B C}; do
    case $s in
      A) static_setup "20+10" 2 8 20mbit 10mbit;;
      B) static_setup "30+20+10" 3 9 30mbit 20mbit 10mbit;;
      C) static_setup "300+200+100" 3 9 300mbit 200mbit 100mbit;;
      R) # references only, for every setup
        REFS_ONLY=1 static_setup "20+10" 2 1 20mbit 10mbit
        REFS_ONLY=1 static_setup "30+20+10" 3 1 30mbit 20mbit 10mbit
        REFS_ONLY=1 static_setup "300+200+100" 3 1 300mbit 200mbit 100mbit;;
    esac
  done
}

run_dynamic() { # [STATIC LOW HIGH] (default 100mbit 200mbit 300mbit)
  # Seed Fig. 11/12: 8 connections, 4 on a 100 Mbit/s channel, 4 on a
  # channel switching between 200 and 300 Mbit/s every 20 s.
  local static=${1:-100mbit} low=${2:-200mbit} high=${3:-300mbit}
  local to="198.18.1.2:$PORT,198.18.2.2:$PORT"
  echo "$(( $(bits "$static") / 1000000 )) $(( $(bits "$low") / 1000000 ))" > "$OUT/dyn.meta"
  for mode in ${MODES:-weighted adaptive round-robin}; do
    $NETNS up bench "$low" "$static"
    timeout $((DYN_SECS + 30)) $NETNS exec bench r /usr/bin/time -f %M -o "$OUT/dyn-$mode.rss" \
      "$BRAID" recv "${SEC[@]}" --no-progress -o /dev/null --idle-limit 2s --listen "$to" \
      --rate-log "$OUT/dyn-$mode.log" &
    local rpid=$!
    wait_listen r $PORT
    date +%s.%N > "$OUT/dyn-$mode.start"
    $NETNS flap bench 1 20 "$high" "$low" "$DYN_SECS" > "$OUT/dyn-$mode.flaps" &
    local fpid=$!
    head -c "${DYN_BYTES:-8000000000}" /dev/zero | timeout "$DYN_SECS" $NETNS exec bench s "$BRAID" send "${SEC[@]}" \
      --no-progress -n 8 --mode "$mode" --to "$to" || true
    wait $rpid || true
    kill "$fpid" 2>/dev/null || true
    wait "$fpid" 2>/dev/null || true
    $NETNS down bench
  done
}

run_loopback() {
  local f="$OUT/loop-input.bin" size=$((2 << 30))
  [[ -s $f ]] || head -c "$size" /dev/urandom > "$f"
  cat "$f" > /dev/null
  echo "tool,connections,rep,bps,rss_kib,load" > "$OUT/loopback.csv"
  for rep in $(seq "$REPS"); do
    for n in 1 2 4; do
      iperf3 -s -1 -p 5299 >/dev/null 2>&1 &
      local ipid=$!
      sleep 0.3
      local ib
      ib=$(iperf3 -c 127.0.0.1 -p 5299 -P "$n" -t 4 -J | python3 -c \
        "import json,sys;print(json.load(sys.stdin)['end']['sum_received']['bits_per_second'])")
      wait $ipid || true
      echo "iperf3,$n,$rep,$ib,0,$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$OUT/loopback.csv"
      local label bin
      for label in braid ${BRAID_B:+braid-b}; do
        bin=$BRAID; [[ $label == braid ]] || bin=$BRAID_B
        local st="$OUT/last-loop.json"
        /usr/bin/time -f %M -o "$OUT/loop.rss" "$bin" recv "${SEC[@]}" --no-progress -o /dev/null \
          --listen 127.0.0.1:$PORT --stats-file "$st" &
        local rpid=$!
        for _ in $(seq 100); do ss -ltnH | grep -q ":$PORT " && break; sleep 0.02; done
        "$bin" send "${SEC[@]}" --no-progress -n "$n" --to 127.0.0.1:$PORT "$f"
        wait $rpid
        local bb
        bb=$(python3 -c "import json;print(json.load(open('$st'))['bps'])")
        echo "$label,$n,$rep,$bb,$(cat "$OUT/loop.rss"),$(cut -d' ' -f1 /proc/loadavg)" \
          | tee -a "$OUT/loopback.csv"
      done
    done
  done
}

# --- issue 11: wide-area channels on `braid emulate` ----------------------

# Capacity in bit/s of a mahimahi trace (one 1500-byte opportunity per line,
# millisecond timestamps; it loops) over [T0, T0 + DUR) seconds.
trace_bps() { # FILE T0 DUR
  python3 - "$@" <<'PY'
import sys
f, t0, dur = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
ts = [int(l) for l in open(f) if l.strip()]
period = max(ts[-1], 1)
a, b = t0 * 1000, (t0 + dur) * 1000
n = 0
for base in range(int(a // period) * period, int(b) + period, period):
    n += sum(1 for t in ts if a <= base + t < b)
print(n * 1500 * 8 / dur)
PY
}

# wan_one SETUP LABEL N BYTES SUMBITS "channels" "send args" "recv args"
# Builds the channels afresh (so every run sees the same trace segment and
# empty queues), runs one transfer, appends one CSV line.
wan_one() {
  local setup=$1 label=$2 n=$3 bytes=$4 sum=$5 chans=$6 sargs=$7 rargs=$8
  local tag="$OUT/wan/${setup//[^A-Za-z0-9+._-]/_}-$label-n$n"
  # shellcheck disable=SC2086
  $NETNS up bench $chans
  local t_up; t_up=$(date +%s.%N)
  $NETNS mptcp bench
  local cc; cc=$($NETNS exec bench s sysctl -n net.ipv4.tcp_congestion_control)
  rm -f "$tag.recv.json" "$tag.send.json"
  # shellcheck disable=SC2086
  timeout $((WAN_SECS * 6 + 60)) $NETNS exec bench r /usr/bin/time -f %M -o "$tag.rss" \
    "$BRAID" recv "${SEC[@]}" --no-progress -o /dev/null --idle-limit 5s \
    --stats-file "$tag.recv.json" --rate-log "$tag.rate" $rargs &
  local rpid=$!
  wait_listen r $PORT
  local t0; t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  head -c "$bytes" /dev/zero | timeout $((WAN_SECS * 6 + 30)) $NETNS exec bench s "$BRAID" send "${SEC[@]}" \
    --no-progress --stats-file "$tag.send.json" -n "$n" $sargs || true
  wait $rpid || true
  local bps=0 secs=0 peak=0
  if [[ -s $tag.recv.json ]]; then
    read -r bps secs peak < <(python3 -c "import json;d=json.load(open('$tag.recv.json'));print(d['bps'],d['seconds'],d['reorder_peak_bytes'])")
  fi
  if [[ $sum == trace:* ]]; then  # sum of the traces' capacity over this run
    local off s2=0 f
    off=$(python3 -c "print($t0 - $t_up)")
    for f in ${sum#trace:}; do
      s2=$(python3 -c "print($s2 + $(trace_bps "$f" "$off" "$secs"))")
    done
    sum=$s2
  fi
  local rss=0; [[ -s $tag.rss ]] && rss=$(tail -1 "$tag.rss")
  echo "$setup,$label,$n,$bps,$sum,$secs,$peak,$rss,$cc,$(cut -d' ' -f1 /proc/loadavg)" \
    | tee -a "$OUT/wan.csv"
  $NETNS down bench
}

# wan_setup NAME SUM CHANNEL... (fastest first; SUM in bit/s, or
# "trace:FILE FILE" to take the traces' capacity over each run)
wan_setup() {
  local name=$1 sum=$2; shift 2
  local chans="$*" to="" i nb bytes
  for ((i = 1; i <= $#; i++)); do to+="198.18.$i.2:$PORT,"; done
  to=${to%,}
  if [[ $sum == trace:* ]]; then
    nb=0
    for f in ${sum#trace:}; do nb=$(python3 -c "print($nb + $(trace_bps "$f" 0 "$WAN_SECS"))"); done
    bytes=$(python3 -c "print(int($nb / 8 * $WAN_SECS))")
  else
    bytes=$(( sum / 8 * WAN_SECS ))
  fi
  local mode
  for mode in ${MODES:-adaptive weighted round-robin}; do
    wan_one "$name" "$mode" "$WAN_N" "$bytes" "$sum" "$chans" "--mode $mode --to $to" "--listen $to"
  done
  [[ ${REFS:-1} != 0 ]] || return 0
  wan_one "$name" mptcp 1 "$bytes" "$sum" "$chans" "--mptcp --to 198.18.1.2:$PORT" \
    "--mptcp --listen 0.0.0.0:$PORT"
  [[ ${REFS:-1} != mptcp ]] || return 0
  # One TCP connection on each channel alone, WAN_SECS long at that
  # channel's rate: their sum is the most any TCP-based scheme gets here.
  local spec bi
  i=1
  for spec in "$@"; do
    if [[ $spec == trace:* ]]; then
      spec=${spec#trace:}
      [[ ${spec##*/} =~ ^[0-9.]+(us|ms|s)$ ]] && spec=${spec%/*}
      bi=$(trace_bps "$spec" 0 "$WAN_SECS")
    else
      bi=$(bits "${spec%%/*}")
    fi
    local lab=single-tcp; (( i > 1 )) && lab="single-tcp-$i"
    wan_one "$name" "$lab" 1 "$(python3 -c "print(int($bi / 8 * $WAN_SECS))")" "$sum" "$chans" \
      "--to 198.18.$i.2:$PORT" "--listen 198.18.$i.2:$PORT"
    i=$((i + 1))
  done
}

run_wan() {
  mkdir -p "$OUT/wan"
  [[ -s $OUT/wan.csv ]] ||
    echo "setup,label,connections,bps,sum_bps,seconds,reorder_peak_bytes,recv_rss_kib,cc,load" > "$OUT/wan.csv"
  local s tm="$TRACES/TMobile-LTE-driving.down" att="$TRACES/ATT-LTE-driving.down"
  for s in ${WAN_SETUPS:-W1 W2 W3 W4 T}; do
    case $s in
      # DELAY is one-way: RTT = 2 x DELAY.
      W1) wan_setup "20+10 rtt 10+10" 30000000 20mbit/5ms 10mbit/5ms;;
      W2) wan_setup "20+10 rtt 10+50" 30000000 20mbit/5ms 10mbit/25ms;;
      W3) wan_setup "20+10 rtt 10+150" 30000000 20mbit/5ms 10mbit/75ms;;
      W4) wan_setup "100+50 rtt 20+100 loss 0+0.1%" 150000000 100mbit/10ms 50mbit/50ms/0.1%;;
      T) wan_setup "trace TMobile+ATT rtt 20+80" "trace:$tm $att" "trace:$tm/10ms" "trace:$att/40ms";;
    esac
  done
}

# --- issue 11 §3: seed 003's Gbit/s setups -----------------------------------

# iperf3 with one stream per channel at once (servers in r, clients in s);
# prints the sum of received bit/s.
iperf_channels() { # NCHANNELS SECS
  local n=$1 secs=$2 i pids=()
  for ((i = 1; i <= n; i++)); do
    $NETNS exec bench r iperf3 -s -1 -B "198.18.$i.2" -p $((5200 + i)) >/dev/null 2>&1 &
    pids+=($!)
  done
  sleep 0.5
  for ((i = 1; i <= n; i++)); do
    $NETNS exec bench s iperf3 -c "198.18.$i.2" -p $((5200 + i)) -t "$secs" -J \
      > "$OUT/iperf-$i.json" 2>/dev/null &
  done
  wait "${pids[@]}" 2>/dev/null || true
  sleep 0.5
  local f sum=0
  for ((i = 1; i <= n; i++)); do
    f=$(python3 -c "import json;print(json.load(open('$OUT/iperf-$i.json'))['end']['sum_received']['bits_per_second'])" 2>/dev/null || echo 0)
    sum=$(python3 -c "print($sum + $f)")
  done
  echo "$sum"
}

# gbit_static NAME RATE... : all modes (2 connections per channel) + MPTCP +
# single TCP + iperf3 (one stream per channel) on the tbf channels, then
# iperf3 and adaptive braid with the tbf qdiscs removed (plain veth).
gbit_static() {
  local name=$1; shift
  local rates=("$@") sum=0 to="" i n=$(( 2 * $# ))
  $NETNS up bench "${rates[@]}"
  $NETNS mptcp bench
  for i in "${!rates[@]}"; do
    sum=$(( sum + $(bits "${rates[$i]}") ))
    to+="198.18.$((i + 1)).2:$PORT,"
  done
  to=${to%,}
  local bytes=$(( sum / 8 * SECS ))
  local ib; ib=$(iperf_channels "$#" "$SECS")
  echo "$name,iperf3-tbf,$#,$ib,$sum,$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$OUT/static.csv"
  for mode in ${MODES:-adaptive weighted round-robin}; do
    one "$name" "$mode" "$n" "$bytes" "$sum" "--mode $mode --to $to" "--listen $to"
  done
  one "$name" mptcp 1 "$bytes" "$sum" "--mptcp --to 198.18.1.2:$PORT" "--mptcp --listen 0.0.0.0:$PORT"
  one "$name" single-tcp 1 "$bytes" "$sum" "--to 198.18.1.2:$PORT" "--listen 198.18.1.2:$PORT"
  for ((i = 1; i <= $#; i++)); do
    $NETNS exec bench s tc qdisc del dev "s$i" root 2>/dev/null || true
  done
  ib=$(iperf_channels "$#" "$SECS")
  echo "$name,iperf3-veth,$#,$ib,$sum,$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$OUT/static.csv"
  one "$name" adaptive-veth "$n" "$bytes" "$sum" "--mode adaptive --to $to" "--listen $to"
  $NETNS down bench
}

run_gbit() {
  [[ -s $OUT/static.csv ]] || echo "setup,label,connections,bps,sum_bps,load" > "$OUT/static.csv"
  local s
  for s in ${GBIT_SETUPS:-G2 G3 D1 D10}; do
    case $s in
      G2) gbit_static "2000+1000" 2gbit 1gbit;;
      G3) gbit_static "3000+2000+1000" 3gbit 2gbit 1gbit;;
      D1) (OUT=$OUT/dyn-1g; DYN_BYTES=1000000000000; mkdir -p "$OUT"; run_dynamic 1gbit 2gbit 3gbit);;
      D10) (OUT=$OUT/dyn-10g; DYN_BYTES=1000000000000; mkdir -p "$OUT"; run_dynamic 10gbit 20gbit 30gbit);;
    esac
  done
}

case "$what" in
  gbit) run_gbit;;
  static) run_static;;
  wan) run_wan;;
  dynamic) run_dynamic;;
  loopback) run_loopback;;
  all) run_loopback; run_static; run_dynamic;;
  *) echo "unknown: $what" >&2; exit 2;;
esac
