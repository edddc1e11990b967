#!/usr/bin/env bash
# Issue 12's benchmarks of the session runtime on real sockets (results in
# docs/BENCHMARKS.md, "Issue 12: …"). Needs root (network namespaces) and
# release builds:
#
#   cargo build --release -p braid-cli                      # emulator, braid send
#   cargo build --release -p braid --example session_bench  # the session driver
#   testbed/bench-session.sh table3   OUTDIR  # seed Table III: PGOS vs MSFQ vs min-RTT
#   testbed/bench-session.sh relay    OUTDIR  # bulk through one relay vs direct (loopback, 1 Gbit/s)
#   testbed/bench-session.sh failover OUTDIR  # 20 kill -9 of a relay under a critical stream
#   testbed/bench-session.sh bulk3    OUTDIR  # one bulk stream over 3 channels vs braid send, MPTCP
#
# Then `python3 testbed/bench-session.py OUTDIR` summarizes every part run.
# Environment: BRAID (braid binary), SB (session_bench binary), T3_SECS
# (per-scheduler run, default 70; the first T3_WARM=10 s are not counted),
# T3_SCHEDS (default "pgos msfq minrtt"), T3_MESSAGE (send frames as
# messages of this many bytes), T3_NO_BE=1 (no Bond2), T3_CAP=Q (the source
# holds unscheduled traffic on guaranteed paths to the estimate's Q-quantile
# minus the promises, e.g. 0.05), T3_CC (the source's congestion control:
# cubic, newreno or fast), T3_FIRST=1 (SessionConfig::scheduled_first),
# T3_TAG (file suffix), T3_CROSS=1 (100 Mbit/s links with replayed cross
# traffic through a T3_QUEUE=75KB bottleneck queue, the seed's testbed,
# instead of trace-driven capacity; T3_OFFSET=S starts its replay S seconds
# into the traces), RELAY_SECS (8), RELAY_REPS (3),
# RELAY_CHANNEL (1gbit/1ms), RELAY_EMU_ONLY=1 (skip loopback), KILLS (20),
# FO_SECS (14), KILL_AT (9), BULK_SECS (20), BULK_SETUPS ("low high"),
# DATA (/work/shared/data).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TARGET=${CARGO_TARGET_DIR:-$HERE/../target}
BRAID=${BRAID:-$TARGET/release/braid}
SB=${SB:-$TARGET/release/examples/session_bench}
DATA=${DATA:-/work/shared/data}
export BRAID
NETNS="bash $HERE/netns.sh"
export BT_OWNER=$$
what=${1:?table3|relay|failover|bulk3}
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
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  $NETNS down sb >/dev/null 2>&1 || true
  $NETNS clean >/dev/null 2>&1 || true
}
trap cleanup EXIT

machine() { # PART
  { echo "part: $1"; echo "date: $(date -u +%FT%TZ)"; echo "nproc: $(nproc)"
    echo "cpu: $(lscpu | sed -n 's/^Model name: *//p')"; echo "kernel: $(uname -r)"
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >> "$OUT/machine.txt"
}
load1() { cut -d' ' -f1 /proc/loadavg; }
S() { $NETNS exec sb s "$@"; }
R() { $NETNS exec sb r "$@"; }

# Waits for a line starting with WORD in FILE.
wait_line() { # FILE WORD
  for _ in $(seq 500); do
    grep -q "^$2" "$1" 2>/dev/null && return 0
    sleep 0.02
  done
  echo "bench-session: no '$2' in $1" >&2; cat "$1" >&2; return 1
}

# Source-address routing in the sender namespace: a socket bound to
# 198.18.i.1 leaves through channel i even towards 198.18.1.2 (one sink
# address, one path per channel, as `bind=` paths on a multi-homed host).
# The sinks bind 198.18.1.2, not 0.0.0.0: a sink on a wildcard address
# answers a packet that came to 198.18.1.2 through channel 2 from r2's own
# address (198.18.2.2), and the source never hears back (see the report).
policy_routes() { # NCHANNELS
  local i s; s=bt$BT_OWNER-sb-s
  for ((i = 2; i <= $1; i++)); do
    ip -n "$s" rule add from "198.18.$i.1" table $((100 + i))
    ip -n "$s" route add 198.18.1.0/24 dev "s$i" table $((100 + i))
  done
}

# The seed's Table III paths: a 100 Mbit/s link minus replayed cross
# traffic (braid-sim's table3.rs): A = FCC yahoo scaled to a 58 Mbit/s
# mean, 20 ms one way; B = Puffer A scaled to 52 Mbit/s, 30 ms one way.
avail_trace() { # CROSS_FILE MEAN_MBIT OUT
  python3 - "$1" "$2" "$3" <<'EOF'
import sys
src, mean, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
rows = [l.split() for l in open(src) if l.strip() and not l.startswith('#')]
v = [float(r[1]) for r in rows]
k = mean / (sum(v) / len(v))
with open(out, 'w') as f:
    f.write('# available = 100 Mbit/s - cross traffic (%s scaled to %.0f Mbit/s mean), 100 ms bins\n' % (src, mean))
    for r, x in zip(rows, v):
        f.write('%s\t%.4f\n' % (r[0], max(100.0 - x * k, 0.5)))
EOF
}

# Cross traffic for T3_CROSS runs: channel 1 carries the FCC trace scaled
# to a 58 Mbit/s mean, channel 2 the Puffer trace scaled to 52 (braid-sim's
# table3.rs), 1200-byte UDP packets from the sender namespace to a discard
# socket in the receiver's, started a second before the session.
cross_traffic() { # TAG SECS
  local i trace mean traces=("$DATA/traces/fcc/fcc_trace_7289_http---www.yahoo.com.tsv"
    "$DATA/traces/puffer/puffer_211017_A.tsv") means=(58 52)
  for i in 1 2; do
    trace=${traces[$((i - 1))]} mean=${means[$((i - 1))]}
    R "$SB" discard --listen "198.18.$i.2:9999" --secs "$(($2 + 3))" > "$1.discard$i" 2>&1 &
    PIDS+=("$!")
    wait_line "$1.discard$i" discard
    S "$SB" cross --bind "198.18.$i.1:0" --to "198.18.$i.2:9999" --trace "$trace" --mean "$mean" \
      --secs "$2" --offset "${T3_OFFSET:-0}" > "$1.cross$i" 2>&1 &
    PIDS+=("$!")
    wait_line "$1.cross$i" cross
  done
  sleep 1
}

run_table3() {
  machine table3
  local secs=${T3_SECS:-70} a="$OUT/avail-A.tsv" b="$OUT/avail-B.tsv" sched
  avail_trace "$DATA/traces/fcc/fcc_trace_7289_http---www.yahoo.com.tsv" 58 "$a"
  avail_trace "$DATA/traces/puffer/puffer_211017_A.tsv" 52 "$b"
  for sched in ${T3_SCHEDS:-pgos msfq minrtt}; do
    local tag="$OUT/t3-$sched${T3_TAG:-}" extra=() be=(--stream Bond2,be,70.34)
    # Fresh channels per run: every scheduler sees the same trace segment.
    if [[ -n ${T3_CROSS:-} ]]; then
      # The seed's testbed: 100 Mbit/s links whose bottleneck queue (Emulab's
      # default, 50 packets) the session shares with replayed cross traffic.
      BT_QUEUE=${T3_QUEUE:-75KB} $NETNS up sb 100mbit/20ms 100mbit/30ms >/dev/null
      cross_traffic "$tag" "$((secs + 8))"
    else
      $NETNS up sb "trace:$a/20ms" "trace:$b/30ms" >/dev/null
    fi
    policy_routes 2
    [[ -z ${T3_MESSAGE:-} ]] || extra+=(--message "$T3_MESSAGE")
    [[ -z ${T3_CAP:-} ]] || extra+=(--cap-unscheduled "$T3_CAP")
    [[ -z ${T3_CC:-} ]] || extra+=(--congestion "$T3_CC")
    [[ -z ${T3_FIRST:-} ]] || extra+=(--scheduled-first 1)
    [[ -z ${T3_NO_BE:-} ]] || be=()
    echo "load_start $(load1)" > "$tag.meta"
    R "$SB" sink --listen 198.18.1.2:9000 --out "$tag.sink" > "$tag.sinklog" 2>&1 &
    local rpid=$!; PIDS+=("$rpid")
    wait_line "$tag.sinklog" listen
    S "$SB" source --to 198.18.1.2:9000 --path bind=198.18.1.1+name=A --path bind=198.18.2.1+name=B \
      --scheduler "$sched" --secs "$secs" \
      --stream Atom,rate,3.249,0.95 --stream Bond1,rate,22.148,0.95 "${be[@]}" "${extra[@]}" \
      > "$tag.source" 2>&1 || echo "source exit $?" >> "$tag.meta"
    wait "$rpid" || true
    echo "load_end $(load1)" >> "$tag.meta"
    $NETNS stats sb 1 > "$tag.emu1.json" 2>/dev/null || true
    $NETNS stats sb 2 > "$tag.emu2.json" 2>/dev/null || true
    [[ -z ${T3_CROSS:-} ]] || { wait_line "$tag.cross1" cross-end; wait_line "$tag.cross2" cross-end; }
    $NETNS down sb
    echo "table3 $sched done (load $(load1))"
  done
}

# CPU ticks (utime + stime) of PID.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# One bulk run: WHERE (loopback|emu) LABEL PATH SINK_ADDR RELAY_ADDR
relay_one() {
  local where=$1 label=$2 path=$3 sinkaddr=$4 relayaddr=$5 rep=$6
  local tag="$OUT/relay-$where-$label-$rep" pre=() rp=""
  [[ $where == emu ]] && pre=($NETNS exec sb r)
  echo "load_start $(load1)" > "$tag.meta"
  # The source's and the sink's CPU (user, system seconds) too: with the
  # relay's, where the two cores went.
  "${pre[@]}" /usr/bin/time -f "%U %S" -o "$tag.sink.time" "$SB" sink --listen "$sinkaddr" --out "$tag.sink" > "$tag.sinklog" 2>&1 &
  local spid=$!; PIDS+=("$spid")
  wait_line "$tag.sinklog" listen
  if [[ $label == relay ]]; then
    "${pre[@]}" "$SB" relay --listen "$relayaddr" > "$tag.relaylog" 2>&1 &
    rp=$!; PIDS+=("$rp")
    wait_line "$tag.relaylog" relay
    rp=$(pgrep -P "$rp" -f session_bench || echo "$rp")  # the process itself under ip netns exec
    echo "relay_ticks_start $(ticks "$rp")" >> "$tag.meta"
  fi
  local src=(/usr/bin/time -f "%U %S" -o "$tag.source.time" "$SB" source --path "$path" --secs "${RELAY_SECS:-8}" --stream bulk,bulk)
  if [[ $where == emu ]]; then
    S "${src[@]}" --to "$sinkaddr" > "$tag.source" 2>&1 || echo "source exit $?" >> "$tag.meta"
  else
    "${src[@]}" --to "$sinkaddr" > "$tag.source" 2>&1 || echo "source exit $?" >> "$tag.meta"
  fi
  wait "$spid" || true
  if [[ -n $rp ]]; then
    echo "relay_ticks_end $(ticks "$rp")" >> "$tag.meta"
    echo "clk_tck $(getconf CLK_TCK)" >> "$tag.meta"
    kill "$rp" 2>/dev/null || true
  fi
  echo "load_end $(load1)" >> "$tag.meta"
}

run_relay() {
  machine relay
  local rep
  [[ -n ${RELAY_EMU_ONLY:-} ]] || for rep in $(seq "${RELAY_REPS:-3}"); do
    relay_one loopback direct direct 127.0.0.1:9300 "" "$rep"
    relay_one loopback relay via=127.0.0.1:7300 127.0.0.1:9300 127.0.0.1:7300 "$rep"
  done
  # 1 Gbit/s emulated, 1 ms one way; the relay sits at the far end of the
  # link (in the sink's namespace), its second hop is local.
  $NETNS up sb "${RELAY_CHANNEL:-1gbit/1ms}" >/dev/null
  for rep in $(seq "${RELAY_REPS:-3}"); do
    relay_one emu direct direct 198.18.1.2:9300 "" "$rep"
    relay_one emu relay via=198.18.1.2:7300 127.0.0.1:9300 198.18.1.2:7300 "$rep"
  done
  $NETNS down sb
}

# 20 runs: a session with a relayed path (channel 1, 50 Mbit/s) and a
# direct one (channel 2, 10 Mbit/s), both 20 ms one way (RTT 40 ms); a
# critical 12 Mbit/s stream (more than the direct path has, so it must
# use the relay) and a bulk stream; the relay is killed -9 at KILL_AT
# (9) s, once the scheduler has mapped the stream (about 5 s after the
# start: estimator warm-up), and the source runs FO_SECS (14) s.
run_failover() {
  machine failover
  $NETNS up sb 50mbit/20ms 10mbit/20ms >/dev/null
  local k run=${FO_SECS:-14} at=${KILL_AT:-9}
  for k in $(seq "${KILLS:-20}"); do
    local tag="$OUT/fo-$k"
    echo "load_start $(load1)" > "$tag.meta"
    R "$SB" sink --listen 198.18.2.2:9000 --out "$tag.sink" > "$tag.sinklog" 2>&1 &
    local spid=$!; PIDS+=("$spid")
    wait_line "$tag.sinklog" listen
    R "$SB" relay --listen 198.18.1.2:7000 > "$tag.relaylog" 2>&1 &
    local rp=$!; PIDS+=("$rp")
    wait_line "$tag.relaylog" relay
    local rpid; rpid=$(pgrep -P "$rp" -f session_bench || echo "$rp")
    S "$SB" source --to 198.18.2.2:9000 --path via=198.18.1.2:7000+name=relay --path direct+name=direct \
      --secs "$run" --stream critical,rate,12,0.95 --stream bulk,bulk > "$tag.source" 2>&1 &
    local src=$!
    sleep "$at"
    echo "kill_ms $(date +%s%3N)" >> "$tag.meta"
    kill -9 "$rpid"
    wait "$src" || echo "source exit $?" >> "$tag.meta"
    wait "$spid" || true
    wait "$rp" 2>/dev/null || true
    echo "load_end $(load1)" >> "$tag.meta"
    echo "failover $k done (load $(load1))"
  done
  $NETNS down sb
}

# One bulk stream over three channels vs `braid send` (adaptive, 4
# connections, as bench-pipe.sh's wan runs) vs kernel MPTCP, same channels.
bulk_setup() { # LABEL SUM_BITS CHANNEL...
  local label=$1 sum=$2; shift 2
  local secs=${BULK_SECS:-20} bytes tag
  bytes=$(( sum / 8 * secs ))
  $NETNS up sb "$@" >/dev/null
  policy_routes 3
  $NETNS mptcp sb
  tag="$OUT/bulk-$label-session"
  echo "load_start $(load1)" > "$tag.meta"
  R "$SB" sink --listen 198.18.1.2:9000 --out "$tag.sink" > "$tag.sinklog" 2>&1 &
  local spid=$!; PIDS+=("$spid")
  wait_line "$tag.sinklog" listen
  S "$SB" source --to 198.18.1.2:9000 --path bind=198.18.1.1 --path bind=198.18.2.1 \
    --path bind=198.18.3.1 --secs "$secs" --stream bulk,bulk > "$tag.source" 2>&1 || true
  wait "$spid" || true
  echo "load_end $(load1)" >> "$tag.meta"
  local to=198.18.1.2:9000,198.18.2.2:9000,198.18.3.2:9000 mode
  for mode in send mptcp; do
    tag="$OUT/bulk-$label-$mode"
    echo "load_start $(load1)" > "$tag.meta"
    local sargs=(--mode adaptive -n 4 --to "$to") rargs=(--listen "$to")
    if [[ $mode == mptcp ]]; then
      sargs=(--mptcp --to 198.18.1.2:9000); rargs=(--mptcp --listen 0.0.0.0:9000)
    fi
    R "$BRAID" recv "${SEC[@]}" --no-progress -o /dev/null --idle-limit 5s --stats-file "$tag.json" "${rargs[@]}" &
    spid=$!; PIDS+=("$spid")
    for _ in $(seq 300); do R ss -ltnH | grep -q ":9000 " && break; sleep 0.02; done
    head -c "$bytes" /dev/zero | timeout $((secs * 6 + 30)) $NETNS exec sb s "$BRAID" send "${SEC[@]}" \
      --no-progress "${sargs[@]}" || true
    wait "$spid" || true
    echo "load_end $(load1)" >> "$tag.meta"
  done
  $NETNS down sb
  echo "bulk3 $label done (load $(load1))"
}

run_bulk3() {
  machine bulk3
  [[ ${BULK_SETUPS:-low high} != *low* ]] ||
    bulk_setup low $(( 60 * 1000000 )) 30mbit/25ms 20mbit/10ms 10mbit/5ms
  [[ ${BULK_SETUPS:-low high} != *high* ]] ||
    bulk_setup high $(( 600 * 1000000 )) 300mbit/25ms 200mbit/10ms 100mbit/5ms
}

case "$what" in
  table3) run_table3;;
  relay) run_relay;;
  failover) run_failover;;
  bulk3) run_bulk3;;
  *) echo "bench-session.sh: table3|relay|failover|bulk3" >&2; exit 2;;
esac
