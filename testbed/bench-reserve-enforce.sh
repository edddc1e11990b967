#!/usr/bin/env bash
# Seed 004 Fig. 9–10 and Fig. 11 on this kernel with `braid broker
# --enforce` (issue 14 §3; results in docs/BENCHMARKS.md, "Issue 14:
# enforcement"). Needs root, iproute2 and iperf3, and a release build:
#
#   cargo build --release -p braid-cli
#   testbed/bench-reserve-enforce.sh fig9  OUTDIR   # TCP writing 4x its reservation + UDP flood
#   testbed/bench-reserve-enforce.sh fig11 OUTDIR   # co-reserved network + CPU, flood + CPU load
#   testbed/bench-reserve-enforce.sh all   OUTDIR
#
# Topology: namespaces enforce-b-s (sender) — enforce-b-r (router) —
# enforce-b-d (receiver), veth pairs; the router's egress to the receiver
# (`rd`) is the bottleneck, owned by the broker: its htb link class (rate =
# ceil = LINK) is the bottleneck rate, reserved flows get their own class.
# TCP is cubic (iperf3 -C; the host default is bbr, which does not take
# loss as its signal; the seed's TCP was loss-based).
#
# Environment: BRAID (binary), SECS (fig9 run length, default 20), LINK
# (default 100mbit), RES (the reservation, default 16mbit), WRITE (the TCP
# write rate, default 64M = 4x), FLOOD (the UDP flood, default 120M),
# SCALE (fig11 time scale: the seed's 10/40/60/80/120/160/200 s times are
# divided by it, default 2), DELAY (one-way delay of the sender–router
# link, e.g. 37500us for the seed's 75 ms RTT: that link is then a `braid
# emulate` link at 1 Gbit/s instead of a veth; default none), CPU_LOAD
# (fig11: busy loops on the receiver's CPU, default 8), RX (fig11's
# receiver: iperf3, or zlib — testbed/cpu-bound-rx.py, which compresses
# every chunk it reads, so that CPU load throttles it as in the seed).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BRAID=${BRAID:-$HERE/../target/release/braid}
SECS=${SECS:-20}
LINK=${LINK:-100mbit}
RES=${RES:-16mbit}
WRITE=${WRITE:-64M}
FLOOD=${FLOOD:-120M}
SCALE=${SCALE:-2}
DELAY=${DELAY:-}
CPU_LOAD=${CPU_LOAD:-8}
RX=${RX:-iperf3}
WHAT=${1:?fig9 | fig11 | all}
OUT=${2:?OUTDIR}
mkdir -p "$OUT"
S=enforce-b-s R=enforce-b-r D=enforce-b-d
PIDS=()

cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for ns in $S $R $D; do ip netns del $ns 2>/dev/null || true; done
    rmdir /sys/fs/cgroup/cpu/braid/res-* 2>/dev/null || true
}
trap cleanup EXIT

up() {
    cleanup
    for ns in $S $R $D; do ip netns add $ns; ip -n $ns link set lo up; done
    if [ -n "$DELAY" ]; then
        # The wide-area part: braid's link emulator (this kernel has no
        # netem), fast enough not to be the bottleneck.
        "$BRAID" emulate --ns-a $S --ns-b $R --dev-a sr --dev-b rs \
            --addr-a 10.78.1.1/24 --addr-b 10.78.1.2/24 --rate 1gbit \
            --delay "$DELAY" --queue 200ms --watch-pid $$ >"$OUT/emulate.log" 2>&1 </dev/null &
        PIDS+=($!)
        for _ in $(seq 100); do
            ip -n $R addr show dev rs 2>/dev/null | grep -q 10.78.1.2 && break; sleep 0.05
        done
        ip -n $R addr show dev rs 2>/dev/null | grep -q 10.78.1.2 \
            || { echo "braid emulate did not start:"; cat "$OUT/emulate.log"; exit 1; }
    else
        ip -n $S link add sr type veth peer name rs netns $R
        ip -n $S addr add 10.78.1.1/24 dev sr; ip -n $S link set sr up
        ip -n $R addr add 10.78.1.2/24 dev rs; ip -n $R link set rs up
    fi
    ip -n $R link add rd type veth peer name dr netns $D
    ip -n $R addr add 10.78.2.1/24 dev rd; ip -n $R link set rd up
    ip -n $D addr add 10.78.2.2/24 dev dr; ip -n $D link set dr up
    ip -n $S route add default via 10.78.1.2
    ip -n $D route add default via 10.78.2.1
    ip netns exec $R sysctl -qw net.ipv4.ip_forward=1
    # The seed's 1 MB socket buffer.
    ip netns exec $S sysctl -qw net.ipv4.tcp_wmem="4096 1048576 1048576"
    ip netns exec $D sysctl -qw net.ipv4.tcp_rmem="4096 1048576 1048576"
}

# broker BORROW: starts `braid broker --enforce` shaping rd; sets URL, TOKEN.
broker() {
    local dir=$OUT/broker
    rm -rf "$dir"; mkdir -p "$dir"
    cat > "$dir/broker.toml" <<TOML
secret = "bench-reserve-enforce-0123456789abcdef"
[[resource]]
name = "bottleneck"
kind = "network"
capacity = "$LINK"
device = "rd"
netns = "$R"
link = "$LINK"
borrow = $1
[[resource]]
name = "rx-cpu"
kind = "cpu"
capacity = "1gbit"
cpus = 1
TOML
    TOKEN=$("$BRAID" broker token --config "$dir/broker.toml" --user bench --role operator)
    "$BRAID" broker --enforce --config "$dir/broker.toml" --db "$dir/b.db" \
        --listen 127.0.0.1:7391 2>"$dir/log" &
    BROKER=$!; PIDS+=($BROKER)
    URL=http://127.0.0.1:7391
    for _ in $(seq 100); do grep -q listening "$dir/log" && break; sleep 0.1; done
    grep -q listening "$dir/log" || { cat "$dir/log"; exit 1; }
}

stop_broker() { kill "$BROKER" 2>/dev/null || true; wait "$BROKER" 2>/dev/null || true; }

reserve() { "$BRAID" reserve --broker "$URL" --token "$TOKEN" --format json "$@"; }

# One Fig. 9–10 run: NAME MODE SACK, MODE = none | police | shape | borrow.
fig9_run() {
    local name=$1 mode=$2 sack=$3
    up
    ip netns exec $S sysctl -qw net.ipv4.tcp_sack="$sack"
    broker "$([ "$mode" = borrow ] && echo true || echo false)"
    if [ "$mode" != none ]; then
        local id
        id=$(reserve create --resource bottleneck --rate "$RES" --duration 1h --provision \
            --flow "src=10.78.1.1,dst=10.78.2.2,proto=tcp,dport=5201" | grep -o '"id": [0-9]*' | head -1 | grep -o '[0-9]*')
        if [ "$mode" = police ]; then
            # No police action in this kernel: a 3-packet queue under the
            # reserved class drops what exceeds the rate instead of holding it.
            local minor
            minor=$(printf '%x' $(( id % 65520 + 2 )))
            tc -n $R qdisc replace dev rd parent bd:$minor handle $minor: pfifo limit 3
        fi
    fi
    local run=()
    ip netns exec $D iperf3 -s -p 5201 -1 >/dev/null & run+=($!)
    ip netns exec $D iperf3 -s -p 5202 -1 >/dev/null & run+=($!)
    sleep 0.5
    ip netns exec $S iperf3 -c 10.78.2.2 -p 5202 -u -b "$FLOOD" -l 1400 -t $((SECS + 2)) >/dev/null & run+=($!)
    sleep 1
    ip netns exec $S iperf3 -c 10.78.2.2 -p 5201 -C cubic -b "$WRITE" -t "$SECS" -i 1 -f k > "$OUT/$name.txt"
    wait "${run[@]}"
    stop_broker
    tc -n $R -s class show dev rd > "$OUT/$name.tc.txt" 2>/dev/null || true
    # Per-second Kbit/s (sender side) and the receiver's average.
    awk '/sec/ && !/sender|receiver/ { for (i = 1; i <= NF; i++) if ($i == "Kbits/sec") print $(i-1) }' \
        "$OUT/$name.txt" > "$OUT/$name.series"
    local avg
    avg=$(awk '/receiver/ { for (i = 1; i <= NF; i++) if ($i == "Kbits/sec") print $(i-1) }' "$OUT/$name.txt")
    printf '%s,%s,%s,%s,%s\n' "$name" "$mode" "$sack" "$avg" "$(paste -sd' ' "$OUT/$name.series")" \
        | tee -a "$OUT/fig9.csv"
}

fig9() {
    echo "name,mode,sack,receiver_avg_kbit,per_second_kbit" > "$OUT/fig9.csv"
    fig9_run none-sack1 none 1
    fig9_run police-sack0 police 0
    fig9_run shape-sack0 shape 0
    fig9_run police-sack1 police 1
    fig9_run shape-sack1 shape 1
    fig9_run borrow-sack1 borrow 1
}

# Fig. 11: an unpaced TCP flow; at the seed's 10 s an 80 Mbit/s flood, 40 s
# a network reservation, 60 s CPU load on the receiver (8 busy loops on
# the receiver's CPU), 80 s a CPU reservation for the receiving process,
# 120 s the network reservation cancelled, 160 s the CPU one; 200 s end.
fig11() {
    up
    broker true
    local t=$((200 / SCALE)) at
    at() { echo "$1 / $SCALE" | bc -l; }
    local rx rxpid tcp
    if [ "$RX" = zlib ]; then
        # A receiver whose per-byte work is CPU-bound (zlib on every chunk).
        ip netns exec $D taskset -c 1 python3 "$HERE/cpu-bound-rx.py" listen 5201 "$OUT/fig11.series" &
        rx=$!; PIDS+=($rx)
    else
        ip netns exec $D taskset -c 1 iperf3 -s -p 5201 -1 >/dev/null & rx=$!; PIDS+=($rx)
    fi
    ip netns exec $D iperf3 -s -p 5202 -1 >/dev/null & PIDS+=($!)
    sleep 0.5
    rxpid=$(pgrep -P "$rx" -f 'iperf3|cpu-bound-rx' || echo "$rx")
    if [ "$RX" = zlib ]; then
        ip netns exec $S python3 "$HERE/cpu-bound-rx.py" send 10.78.2.2 5201 "$t" & tcp=$!
    else
        ip netns exec $S iperf3 -c 10.78.2.2 -p 5201 -C cubic -t "$t" -i 1 -f k > "$OUT/fig11.txt" & tcp=$!
    fi
    sleep "$(at 10)"
    echo "$(date +%T) flood" >> "$OUT/fig11.events"
    ip netns exec $S iperf3 -c 10.78.2.2 -p 5202 -u -b 80M -l 1400 -t $((t - 10 / SCALE)) >/dev/null & PIDS+=($!)
    sleep "$(at 30)"
    local net
    net=$(reserve create --resource bottleneck --rate 50mbit --duration 1h --provision \
        --flow "src=10.78.1.1,dst=10.78.2.2,proto=tcp,dport=5201" | grep -o '"id": [0-9]*' | head -1 | grep -o '[0-9]*')
    echo "$(date +%T) net reservation $net" >> "$OUT/fig11.events"
    sleep "$(at 20)"
    local load=()
    for _ in $(seq "$CPU_LOAD"); do taskset -c 1 sh -c 'while :; do :; done' & load+=($!); PIDS+=($!); done
    echo "$(date +%T) cpu load" >> "$OUT/fig11.events"
    sleep "$(at 20)"
    local cpu
    cpu=$(reserve create --resource rx-cpu --rate 500mbit --duration 1h --provision --pid "$rxpid" \
        | grep -o '"id": [0-9]*' | head -1 | grep -o '[0-9]*')
    echo "$(date +%T) cpu reservation $cpu (pid $rxpid, 0.5 CPU)" >> "$OUT/fig11.events"
    sleep "$(at 40)"
    reserve cancel "$net" >/dev/null
    echo "$(date +%T) net reservation cancelled" >> "$OUT/fig11.events"
    sleep "$(at 40)"
    reserve cancel "$cpu" >/dev/null
    echo "$(date +%T) cpu reservation cancelled" >> "$OUT/fig11.events"
    wait "$tcp"
    kill "${load[@]}" 2>/dev/null || true
    stop_broker
    if [ "$RX" != zlib ]; then
        awk '/sec/ && !/sender|receiver/ { for (i = 1; i <= NF; i++) if ($i == "Kbits/sec") print $(i-1) }' \
            "$OUT/fig11.txt" > "$OUT/fig11.series"
    fi
}

{
    echo "date: $(date -u +%FT%TZ)"
    echo "host: $(uname -r), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "command: $0 $*  (SECS=$SECS LINK=$LINK RES=$RES WRITE=$WRITE FLOOD=$FLOOD SCALE=$SCALE DELAY=$DELAY CPU_LOAD=$CPU_LOAD RX=$RX)"
    echo "braid: $("$BRAID" --version 2>/dev/null || echo "$BRAID")"
} | tee "$OUT/run.txt"
case $WHAT in
    fig9) fig9 ;;
    fig11) fig11 ;;
    all) fig9; fig11 ;;
    *) echo "unknown: $WHAT (fig9 | fig11 | all)" >&2; exit 2 ;;
esac
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/run.txt"
