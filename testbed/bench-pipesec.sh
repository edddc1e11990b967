#!/usr/bin/env bash
# Issue 13: the pipe authenticated — `braid send`/`recv` on loopback,
# encrypted (the default), --no-encrypt and --insecure from a pipe beside
# `ssh cat`, and encrypted from a file beside `scp`, in the same run (results: docs/BENCHMARKS.md, "Issue 13: the
# pipe, authenticated").
#
#   cargo build --release -p braid-cli
#   testbed/bench-pipesec.sh OUTDIR
#
# Environment: BRAID (binary), BYTES (per run, default 2 GB), REPS
# (default 3), N (connections, default 2), SSH_PORT (an sshd listening on
# 127.0.0.1 that accepts SSH_KEY for root; without it the ssh rows are
# skipped and the table says so).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BRAID=${BRAID:-$HERE/../target/release/braid}
BYTES=${BYTES:-2000000000}
REPS=${REPS:-3}
N=${N:-2}
OUT=${1:?OUTDIR}
mkdir -p "$OUT"
PORT=${PORT:-9470}
"$BRAID" keygen "$OUT/pipe.key" >/dev/null 2>&1 || [ -f "$OUT/pipe.key" ]
{ echo "date: $(date -u +%FT%TZ)"; echo "nproc: $(nproc)";
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p')"; echo "kernel: $(uname -r)";
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"; } > "$OUT/machine.txt"

now() { date +%s.%N; }
cpu_of() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat" 2>/dev/null || echo 0; }

# braid_run LABEL FROM ARGS...: one transfer; prints "label seconds
# cpu_seconds". FROM is `pipe` (`head -c … /dev/zero |`, as the ssh rows
# read), `stdin` (stdin redirected from the file `scp` copies, as the
# ssh-…-stdin rows read) or `file` (that file as an argument, as a file
# transfer reads).
braid_run() {
  local label=$1 from=$2; shift 2
  "$BRAID" recv --no-progress --listen 127.0.0.1:$PORT -o /dev/null "$@" \
    2>"$OUT/recv.err" &
  local rx=$!
  for _ in $(seq 200); do ss -ltnH | grep -q ":$PORT " && break; sleep 0.02; done
  local send="\"$BRAID\" send --no-progress -n $N --to 127.0.0.1:$PORT $*"
  case $from in
    file) send="$send \"$OUT/scp.in\"";;
    stdin) send="$send < \"$OUT/scp.in\"";;
    *) send="head -c $BYTES /dev/zero | $send";;
  esac
  local t0; t0=$(now)
  /usr/bin/time -f "%U %S" -o "$OUT/send.time" bash -c "$send" 2>>"$OUT/send.err"
  wait $rx
  local t1; t1=$(now)
  echo "$label $(echo "$t1 - $t0" | bc -l) $(awk '{print $1 + $2}' "$OUT/send.time")"
}

# ssh_run LABEL CIPHER [stdin]: from `head -c … /dev/zero |`, or with
# stdin redirected from the file `scp` copies.
ssh_run() {
  local label=$1 cipher=$2 src="head -c $BYTES /dev/zero |" redirect=""
  if [ "${3:-}" = stdin ]; then src=""; redirect="< \"$OUT/scp.in\""; fi
  local t0; t0=$(now)
  /usr/bin/time -f "%U %S" -o "$OUT/send.time" bash -c \
    "$src ssh -p $SSH_PORT -i $SSH_KEY -c $cipher -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR root@127.0.0.1 'cat > /dev/null' $redirect"
  local t1; t1=$(now)
  echo "$label $(echo "$t1 - $t0" | bc -l) $(awk '{print $1 + $2}' "$OUT/send.time")"
}

scp_run() {
  local t0; t0=$(now)
  scp -q -P "$SSH_PORT" -i "$SSH_KEY" -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "$OUT/scp.in" root@127.0.0.1:"$OUT/scp.out"
  local t1; t1=$(now)
  rm -f "$OUT/scp.out"
  echo "scp $(echo "$t1 - $t0" | bc -l) -"
}

: > "$OUT/runs.txt"
head -c "$BYTES" /dev/zero > "$OUT/scp.in"
for r in $(seq "$REPS"); do
  braid_run encrypted pipe --key "$OUT/pipe.key" | tee -a "$OUT/runs.txt"
  braid_run no-encrypt pipe --key "$OUT/pipe.key" --no-encrypt | tee -a "$OUT/runs.txt"
  braid_run insecure pipe --insecure | tee -a "$OUT/runs.txt"
  braid_run encrypted-file file --key "$OUT/pipe.key" | tee -a "$OUT/runs.txt"
  braid_run encrypted-stdin stdin --key "$OUT/pipe.key" | tee -a "$OUT/runs.txt"
  # What the pipe's source alone moves: `head` writes 4 KiB at a time.
  t0=$(now); head -c "$BYTES" /dev/zero | cat > /dev/null; t1=$(now)
  echo "head-pipe-alone $(echo "$t1 - $t0" | bc -l) -" | tee -a "$OUT/runs.txt"
  if [ -n "${SSH_PORT:-}" ]; then
    ssh_run ssh-chacha20 chacha20-poly1305@openssh.com | tee -a "$OUT/runs.txt"
    ssh_run ssh-aes128gcm aes128-gcm@openssh.com | tee -a "$OUT/runs.txt"
    ssh_run ssh-chacha20-stdin chacha20-poly1305@openssh.com stdin | tee -a "$OUT/runs.txt"
    scp_run | tee -a "$OUT/runs.txt"
  fi
done
rm -f "$OUT/scp.in" "$OUT/scp.out"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
python3 - "$OUT/runs.txt" "$BYTES" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    l, s, c = line.split()
    rows.setdefault(l, []).append((float(s), c))
b = int(sys.argv[2])
print("| run | Gbit/s (median of %d) | min–max | sender CPU-s / GB |" % len(next(iter(rows.values()))))
print("| --- | --- | --- | --- |")
for l, v in rows.items():
    g = sorted(b * 8 / s / 1e9 for s, _ in v)
    cpu = [float(c) for _, c in v if c != "-"]
    cs = f"{statistics.median(cpu) / (b / 1e9):.2f}" if cpu else "–"
    print(f"| {l} | {statistics.median(g):.2f} | {g[0]:.2f}–{g[-1]:.2f} | {cs} |")
PY
