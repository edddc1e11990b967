#!/usr/bin/env bash
# braid testbed: N parallel channels between a sender and a receiver network
# namespace (see testbed/README.md).
#
#   netns.sh up NAME CHANNEL [CHANNEL...]
#                                       build NAME with one channel each:
#                                       RATE[/DELAY[/LOSS]]  (20mbit, 10mbit/40ms,
#                                       100mbit/25ms/0.1%) or trace:FILE[/DELAY];
#                                       relay:SPEC ends the channel in a middle
#                                       namespace m instead of r (see below)
#   netns.sh rate NAME CH RATE          change channel CH's rate (1-based)
#   netns.sh set NAME CH KEY VALUE      change an emulated channel: KEY is
#                                       rate, delay, loss, queue or trace
#   netns.sh stats NAME CH              an emulated channel's counters (JSON:
#                                       delivered, queue drops, losses, each way)
#   netns.sh link NAME CH up|down       take channel CH up or down
#   netns.sh flap NAME CH PERIOD A B DURATION
#                                       alternate CH between rates A and B
#                                       every PERIOD seconds for DURATION s
#                                       (runs in the foreground; & it)
#   netns.sh mptcp NAME                 MPTCP endpoints/limits on all channels
#   netns.sh exec NAME s|r|m CMD...     run CMD in the sender/receiver/middle ns
#   netns.sh down NAME                  tear NAME down
#   netns.sh clean                      remove every stale testbed namespace
#   netns.sh check                      exit 0 if root and `ip netns` work
#
# Names: namespaces are "bt<pid>-NAME-s" and "bt<pid>-NAME-r", where <pid>
# is the process that built them (BT_OWNER, default: this shell's parent),
# so parallel runs never collide and `clean` can tell stale ones (owner
# dead) from live ones. Channel i (1-based) joins s<i> (sender,
# 198.18.<i>.1/24) and r<i> (receiver, 198.18.<i>.2/24). A plain RATE is a
# veth pair with a tbf qdisc on the sender side's egress. A channel with a
# DELAY, a LOSS or a trace is a pair of TUN devices joined by `braid emulate`
# (this kernel has no netem): DELAY is one-way and applies in both
# directions (RTT = 2 x DELAY), LOSS applies sender -> receiver only (like
# netem on the sender's egress), the rate (or trace) both ways, and the
# queue holds max(100 ms, RTT) at the rate (BT_QUEUE overrides, e.g. 64KiB
# or 50ms). The emulator runs in the background, exits when BT_OWNER does,
# and logs to /run/braid-testbed/<ns>/ch<i>.log. BRAID names the braid
# binary (default: `braid` on PATH). Addresses are in 198.18.0.0/15 (RFC
# 2544 benchmarking range) and exist only inside the namespaces.
#
# Relays: a channel written relay:SPEC (e.g. relay:100mbit/40ms) joins s<i>
# to m<i> in a third namespace "bt<pid>-NAME-m" (198.18.<i>.2 is then m's),
# and an unshaped veth x<i> joins m (198.19.<i>.1) to r (198.19.<i>.2); m
# routes the other channels' subnets to r over it (and r routes channel i's
# subnet back to m). A relay in m listening on
# 198.18.<i>.2 thus reaches a sink in r at its address on any direct channel,
# e.g. 198.18.1.2, and killing that relay cuts only channel i's path.
set -euo pipefail

OWNER="${BT_OWNER:-$PPID}"
BRAID="${BRAID:-braid}"
RUNDIR=/run/braid-testbed
ns() { echo "bt${OWNER}-$1-$2"; }
state() { echo "$RUNDIR/bt${OWNER}-$1"; }

tbf() { # dev rate
  local dev=$1 rate=$2
  # burst: at least 10 ms at the rate, at least 64 KiB; queue: 50 ms.
  local bits; bits=$(rate_bits "$rate")
  local burst=$(( bits / 8 / 100 )); (( burst < 65536 )) && burst=65536
  local limit=$(( bits / 8 / 20 )); (( limit < 2 * burst )) && limit=$(( 2 * burst ))
  echo "tbf rate $rate burst $burst limit $limit"
}

rate_bits() { # 400mbit -> bits/s
  local r=${1,,}
  case "$r" in
    *gbit) echo $(( ${r%gbit} * 1000000000 ));;
    *mbit) echo $(( ${r%mbit} * 1000000 ));;
    *kbit) echo $(( ${r%kbit} * 1000 ));;
    *bit)  echo "${r%bit}";;
    *) echo "bad rate $1 (use e.g. 400mbit)" >&2; exit 2;;
  esac
}

# Splits a channel spec into globals C_RATE C_DELAY C_LOSS C_TRACE.
parse_channel() {
  local spec=$1
  C_RATE="" C_DELAY="" C_LOSS="" C_TRACE="" C_RELAY=""
  if [[ $spec == relay:* ]]; then
    C_RELAY=1; spec=${spec#relay:}
  fi
  if [[ $spec == trace:* ]]; then
    local rest=${spec#trace:}
    # The trace path may contain '/': a DELAY is the last part if it is one.
    if [[ $rest == */* && ${rest##*/} =~ ^[0-9.]+(us|ms|s)$ ]]; then
      C_DELAY=${rest##*/}; rest=${rest%/*}
    fi
    [[ -f $rest ]] || { echo "netns.sh: trace $rest: no such file" >&2; exit 2; }
    C_TRACE=$rest
    return
  fi
  IFS=/ read -r C_RATE C_DELAY C_LOSS extra <<<"$spec"
  [[ -z ${extra:-} ]] || { echo "netns.sh: bad channel $spec (RATE[/DELAY[/LOSS]])" >&2; exit 2; }
  rate_bits "$C_RATE" >/dev/null
  if [[ -n $C_DELAY && ! $C_DELAY =~ ^[0-9.]+(us|ms|s)$ ]]; then
    echo "netns.sh: bad delay $C_DELAY in $spec (e.g. 40ms)" >&2; exit 2
  fi
  if [[ -n $C_LOSS && ! $C_LOSS =~ ^[0-9.]+%?$ ]]; then
    echo "netns.sh: bad loss $C_LOSS in $spec (e.g. 0.1%)" >&2; exit 2
  fi
}

# Queue for an emulated channel: BT_QUEUE, else max(100 ms, 2 x DELAY).
emu_queue() {
  if [[ -n ${BT_QUEUE:-} ]]; then echo "$BT_QUEUE"; return; fi
  local d=${C_DELAY:-0ms} us
  case "$d" in
    *us) us=${d%us};; *ms) us=$(awk "BEGIN{print ${d%ms}*1000}");; *s) us=$(awk "BEGIN{print ${d%s}*1000000}");;
  esac
  awk "BEGIN{q=2*$us/1000; if (q < 100) q = 100; printf \"%dms\", q}"
}

up_emulated() { # name i s far (r, or m for a relay channel)
  local name=$1 i=$2 s=$3 r=$4 dir
  dir=$(state "$name")
  command -v "$BRAID" >/dev/null || { echo "netns.sh: $BRAID not found (set BRAID=path/to/braid)" >&2; exit 1; }
  local args=(emulate --ns-a "$s" --ns-b "$r" --dev-a "s$i" --dev-b "r$i"
    --addr-a "198.18.$i.1/24" --addr-b "198.18.$i.2/24"
    --delay "${C_DELAY:-0ms}" --loss "${C_LOSS:-0}" --back-loss 0
    --queue "$(emu_queue)" --seed "$i" --watch-pid "$OWNER" --control "$dir/ch$i.ctl"
    --every 1s)
  if [[ -n $C_TRACE ]]; then args+=(--trace "$C_TRACE"); else args+=(--rate "$C_RATE"); fi
  "$BRAID" "${args[@]}" >"$dir/ch$i.log" 2>&1 </dev/null &
  echo $! >"$dir/ch$i.pid"
  local t
  for t in $(seq 100); do
    if ip -n "$r" addr show dev "r$i" 2>/dev/null | grep -q "198.18.$i.2"; then return 0; fi
    if ! kill -0 "$(cat "$dir/ch$i.pid")" 2>/dev/null; then break; fi
    sleep 0.05
  done
  echo "netns.sh: channel $i: braid emulate did not start:" >&2
  cat "$dir/ch$i.log" >&2
  exit 1
}

cmd_up() {
  local name=$1; shift
  local s r m far i=1 relays=() direct=()
  s=$(ns "$name" s); r=$(ns "$name" r); m=$(ns "$name" m)
  for spec in "$@"; do parse_channel "$spec"; done  # fail before building
  cmd_down "$name" 2>/dev/null || true
  mkdir -p "$(state "$name")"
  ip netns add "$s"
  ip netns add "$r"
  ip -n "$s" link set lo up
  ip -n "$r" link set lo up
  for spec in "$@"; do
    parse_channel "$spec"
    far=$r
    if [[ -n $C_RELAY ]]; then
      if ! ip netns list | grep -qw "$m"; then
        ip netns add "$m"
        ip -n "$m" link set lo up
      fi
      far=$m
      relays+=("$i")
    else
      direct+=("$i")
    fi
    if [[ -n $C_DELAY || -n $C_LOSS || -n $C_TRACE ]]; then
      up_emulated "$name" "$i" "$s" "$far"
      i=$((i + 1))
      continue
    fi
    ip link add "s$i" netns "$s" type veth peer name "r$i" netns "$far"
    ip -n "$s" addr add "198.18.$i.1/24" dev "s$i"
    ip -n "$far" addr add "198.18.$i.2/24" dev "r$i"
    # No offloads: tbf then sees wire-sized packets.
    ip netns exec "$s" ethtool -K "s$i" tso off gso off >/dev/null 2>&1 || true
    ip -n "$s" link set "s$i" up
    ip -n "$far" link set "r$i" up
    # shellcheck disable=SC2046
    tc -n "$s" qdisc add dev "s$i" root $(tbf "s$i" "$C_RATE")
    i=$((i + 1))
  done
  local k first=1
  for i in "${relays[@]}"; do
    ip link add "x$i" netns "$m" type veth peer name "x$i" netns "$r"
    ip -n "$m" addr add "198.19.$i.1/24" dev "x$i"
    ip -n "$r" addr add "198.19.$i.2/24" dev "x$i"
    ip -n "$m" link set "x$i" up
    ip -n "$r" link set "x$i" up
    # r answers a relay bound to its channel address (198.18.i.2) over x<i>.
    ip -n "$r" route add "198.18.$i.0/24" via "198.19.$i.1"
    if [[ $first == 1 ]]; then
      for k in "${direct[@]}"; do
        ip -n "$m" route add "198.18.$k.0/24" via "198.19.$i.2"
      done
      first=0
    fi
  done
}

# Sends one control line to emulated channel CH (fails if it is not one).
emu_ctl() { # name ch line
  local ctl; ctl="$(state "$1")/ch$2.ctl"
  [[ -p $ctl ]] || { echo "netns.sh: channel $2 of $1 is not emulated (tbf channels take only rate)" >&2; exit 2; }
  timeout 2 bash -c 'echo "$1" >"$2"' _ "$3" "$ctl" || { echo "netns.sh: channel $2: emulator not answering" >&2; exit 1; }
}

cmd_rate() {
  local name=$1 ch=$2 rate=$3
  rate_bits "$rate" >/dev/null
  if [[ -p "$(state "$name")/ch$ch.ctl" ]]; then
    emu_ctl "$name" "$ch" "rate $rate"
    return
  fi
  # shellcheck disable=SC2046
  tc -n "$(ns "$name" s)" qdisc change dev "s$ch" root $(tbf "s$ch" "$rate")
}

cmd_stats() {
  local name=$1 ch=$2 log
  log="$(state "$name")/ch$ch.log"
  [[ -f $log ]] || { echo "netns.sh: channel $ch of $name is not emulated" >&2; exit 2; }
  # The emulator writes its counters every second (--every 1s).
  grep '^{' "$log" | tail -1
}

cmd_set() {
  local name=$1 ch=$2 key=$3 value=$4
  case "$key" in
    rate|delay|queue|trace) emu_ctl "$name" "$ch" "$key $value";;
    # Loss stays sender -> receiver only, as when the channel was built.
    loss) emu_ctl "$name" "$ch" "loss $value"; emu_ctl "$name" "$ch" "back-loss 0";;
    *) echo "netns.sh: set: KEY is rate, delay, loss, queue or trace" >&2; exit 2;;
  esac
}

cmd_link() {
  local name=$1 ch=$2 state=$3
  ip -n "$(ns "$name" s)" link set "s$ch" "$state"
}

cmd_flap() {
  local name=$1 ch=$2 period=$3 a=$4 b=$5 duration=$6
  local t=0 cur=$b
  while (( t < duration )); do
    sleep "$period"; t=$((t + period))
    if [[ $cur == "$a" ]]; then cur=$b; else cur=$a; fi
    cmd_rate "$name" "$ch" "$cur"
    echo "$(date +%s.%N) ch$ch $cur"
  done
}

cmd_mptcp() {
  local name=$1 s r n
  s=$(ns "$name" s); r=$(ns "$name" r)
  n=$(ip -n "$s" -o link show | grep -cE '^[0-9]+: s[0-9]+[@:]' || true)
  ip -n "$s" mptcp limits set subflow 8 add_addr_accepted 8
  ip -n "$r" mptcp limits set subflow 8 add_addr_accepted 8
  ip -n "$r" mptcp endpoint flush
  ip -n "$s" mptcp endpoint flush
  for ((i = 2; i <= n; i++)); do
    # The receiver announces its other channels; the sender opens a subflow
    # to each (the route picks channel i's source address).
    ip -n "$r" mptcp endpoint add "198.18.$i.2" dev "r$i" signal
  done
}

cmd_exec() {
  local name=$1 side=$2; shift 2
  exec ip netns exec "$(ns "$name" "$side")" "$@"
}

# Stops the emulators under state dir $1 (TERM, then KILL after 2 s).
stop_emulators() {
  local dir=$1 f pid t
  [[ -d $dir ]] || return 0
  for f in "$dir"/ch*.pid; do
    [[ -f $f ]] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || continue
    for t in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}

cmd_down() {
  local name=$1
  stop_emulators "$(state "$name")"
  ip netns del "$(ns "$name" s)" 2>/dev/null || true
  ip netns del "$(ns "$name" r)" 2>/dev/null || true
  ip netns del "$(ns "$name" m)" 2>/dev/null || true
}

cmd_clean() {
  local n pid
  for n in $(ip netns list | awk '{print $1}' | grep -E '^bt[0-9]+-' || true); do
    pid=${n#bt}; pid=${pid%%-*}
    if ! kill -0 "$pid" 2>/dev/null; then
      ip netns del "$n" 2>/dev/null || true
    fi
  done
  # Emulators of dead owners exit by themselves (--watch-pid); their state
  # directories stay behind.
  for n in "$RUNDIR"/bt*; do
    [[ -d $n ]] || continue
    pid=${n##*/bt}; pid=${pid%%-*}
    kill -0 "$pid" 2>/dev/null || stop_emulators "$n"
  done
}

cmd_check() {
  [[ $(id -u) == 0 ]] || { echo "not root"; exit 1; }
  command -v ip >/dev/null || { echo "iproute2 missing"; exit 1; }
  command -v tc >/dev/null || { echo "tc missing"; exit 1; }
  local t="btcheck$$"
  ip netns add "$t" 2>/dev/null || { echo "ip netns unavailable"; exit 1; }
  ip netns del "$t"
}

sub=${1:-}; shift || true
case "$sub" in
  up) cmd_up "$@";;
  rate) cmd_rate "$@";;
  set) cmd_set "$@";;
  stats) cmd_stats "$@";;
  link) cmd_link "$@";;
  flap) cmd_flap "$@";;
  mptcp) cmd_mptcp "$@";;
  exec) cmd_exec "$@";;
  down) cmd_down "$@";;
  clean) cmd_clean;;
  check) cmd_check;;
  *) sed -n '2,48p' "$0"; exit 2;;
esac
