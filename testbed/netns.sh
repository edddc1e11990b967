#!/usr/bin/env bash
# braid testbed: N parallel rate-shaped channels between a sender and a
# receiver network namespace (see testbed/README.md).
#
#   netns.sh up NAME RATE [RATE...]     build NAME with one channel per RATE
#   netns.sh rate NAME CH RATE          change channel CH's rate (1-based)
#   netns.sh link NAME CH up|down       take channel CH up or down
#   netns.sh flap NAME CH PERIOD A B DURATION
#                                       alternate CH between rates A and B
#                                       every PERIOD seconds for DURATION s
#                                       (runs in the foreground; & it)
#   netns.sh mptcp NAME                 MPTCP endpoints/limits on all channels
#   netns.sh exec NAME s|r CMD...       run CMD in the sender/receiver ns
#   netns.sh down NAME                  tear NAME down
#   netns.sh clean                      remove every stale testbed namespace
#   netns.sh check                      exit 0 if root and `ip netns` work
#
# Names: namespaces are "bt<pid>-NAME-s" and "bt<pid>-NAME-r", where <pid>
# is the process that built them (BT_OWNER, default: this shell's parent),
# so parallel runs never collide and `clean` can tell stale ones (owner
# dead) from live ones. Channel i (1-based) is a veth pair
# s<i> (sender, 198.18.<i>.1/24) <-> r<i> (receiver, 198.18.<i>.2/24) with a
# tbf qdisc on the sender side's egress. Addresses are in 198.18.0.0/15
# (RFC 2544 benchmarking range) and exist only inside the namespaces.
#
# netem, fq and prio are not available in this kernel: delay and loss cannot
# be emulated here, only rate (tbf).
set -euo pipefail

OWNER="${BT_OWNER:-$PPID}"
ns() { echo "bt${OWNER}-$1-$2"; }

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

cmd_up() {
  local name=$1; shift
  local s r i=1
  s=$(ns "$name" s); r=$(ns "$name" r)
  cmd_down "$name" 2>/dev/null || true
  ip netns add "$s"
  ip netns add "$r"
  ip -n "$s" link set lo up
  ip -n "$r" link set lo up
  for rate in "$@"; do
    ip link add "s$i" netns "$s" type veth peer name "r$i" netns "$r"
    ip -n "$s" addr add "198.18.$i.1/24" dev "s$i"
    ip -n "$r" addr add "198.18.$i.2/24" dev "r$i"
    # No offloads: tbf then sees wire-sized packets.
    ip netns exec "$s" ethtool -K "s$i" tso off gso off >/dev/null 2>&1 || true
    ip -n "$s" link set "s$i" up
    ip -n "$r" link set "r$i" up
    # shellcheck disable=SC2046
    tc -n "$s" qdisc add dev "s$i" root $(tbf "s$i" "$rate")
    i=$((i + 1))
  done
}

cmd_rate() {
  local name=$1 ch=$2 rate=$3
  # shellcheck disable=SC2046
  tc -n "$(ns "$name" s)" qdisc change dev "s$ch" root $(tbf "s$ch" "$rate")
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
  n=$(ip -n "$s" -o link show | grep -c ' s[0-9]*@' || true)
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

cmd_down() {
  local name=$1
  ip netns del "$(ns "$name" s)" 2>/dev/null || true
  ip netns del "$(ns "$name" r)" 2>/dev/null || true
}

cmd_clean() {
  local n pid
  for n in $(ip netns list | awk '{print $1}' | grep -E '^bt[0-9]+-' || true); do
    pid=${n#bt}; pid=${pid%%-*}
    if ! kill -0 "$pid" 2>/dev/null; then
      ip netns del "$n" 2>/dev/null || true
    fi
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
  link) cmd_link "$@";;
  flap) cmd_flap "$@";;
  mptcp) cmd_mptcp "$@";;
  exec) cmd_exec "$@";;
  down) cmd_down "$@";;
  clean) cmd_clean;;
  check) cmd_check;;
  *) sed -n '2,28p' "$0"; exit 2;;
esac
