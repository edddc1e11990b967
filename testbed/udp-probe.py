#!/usr/bin/env python3
"""UDP probe and counters for measuring braid emulate (testbed/bench-emulate.sh).

Every probe datagram carries a sequence number and the sender's
CLOCK_MONOTONIC in nanoseconds. CLOCK_MONOTONIC is one clock for every
network namespace of a machine, so at the receiver `receive - send` is the
one-way delay exactly. The receiver takes the kernel's receive timestamp (SO_TIMESTAMPNS),
so its own scheduling delay does not count.

  udp-probe.py send --to HOST:PORT --pps N --size BYTES (--count N | --seconds S)
      paced sender; --size is the UDP payload (IP packet = size + 28)
  udp-probe.py recv --bind HOST:PORT --seconds S [--expect N] [--loss P]
      receiver; prints one JSON line: packets, one-way delay percentiles (ms),
      and, with --expect, the loss rate, its binomial 99 % interval for P,
      and a hash of the lost sequence numbers (same seed -> same hash)
  udp-probe.py devcount --dev DEV --seconds S [--interval 0.1]
      prints `mono_ns rx_bytes rx_packets` of DEV every interval (run it in
      the device's namespace: `ip netns exec NS udp-probe.py devcount ...`)
  udp-probe.py rate FILE --skip S --seconds S [--l2 14]
      mean rate of a devcount file over a window, as the device counts it
      and in IP bytes (device bytes - l2 x packets)
  udp-probe.py corr FILE --trace TRACE --epoch NS --bin S --seconds S
      Pearson correlation at BIN-second bins between the rate a devcount
      file saw and the trace's rate; bins are aligned to the emulator's model
      time zero (NS, CLOCK_MONOTONIC, from its start-up line)
"""
import argparse
import hashlib
import json
import math
import socket
import struct
import sys
import time

HDR = struct.Struct("!QQ")  # seq, send monotonic ns
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def hostport(s):
    h, p = s.rsplit(":", 1)
    return h, int(p)


def cmd_send(a):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    dst = hostport(a.to)
    size = max(a.size, HDR.size)
    pad = bytes(size - HDR.size)
    count = a.count if a.count else int(a.seconds * a.pps)
    gap = 1e9 / a.pps
    t0 = time.monotonic_ns()
    sent = 0
    errors = 0
    for seq in range(count):
        due = t0 + int(seq * gap)
        while True:
            now = time.monotonic_ns()
            if now >= due:
                break
            if due - now > 200_000:
                time.sleep((due - now - 100_000) / 1e9)
        try:
            sock.sendto(HDR.pack(seq, time.monotonic_ns()) + pad, dst)
            sent += 1
        except OSError:
            errors += 1
    el = (time.monotonic_ns() - t0) / 1e9
    print(json.dumps({"sent": sent, "send_errors": errors, "seconds": round(el, 3),
                      "pps": round(sent / el, 1) if el else 0}))


def pct(sorted_vals, q):
    if not sorted_vals:
        return None
    i = min(len(sorted_vals) - 1, max(0, math.ceil(q * len(sorted_vals)) - 1))
    return sorted_vals[i]


def binom_interval(n, p, level=0.99):
    """Smallest central interval [lo, hi] of Binomial(n, p) holding `level`."""
    tail = (1 - level) / 2
    # log pmf by lgamma; walk the cdf
    lp, lq = math.log(p), math.log1p(-p)
    lnf = math.lgamma(n + 1)

    def pmf(k):
        return math.exp(lnf - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * lp + (n - k) * lq)

    mean = n * p
    sd = math.sqrt(n * p * (1 - p))
    k0 = max(0, int(mean - 10 * sd - 10))
    k1 = min(n, int(mean + 10 * sd + 10))
    cdf = 0.0
    lo = hi = None
    for k in range(k0, k1 + 1):
        cdf += pmf(k)
        if lo is None and cdf >= tail:
            lo = k
        if hi is None and cdf >= 1 - tail:
            hi = k
            break
    return lo, hi


def cmd_recv(a):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # SO_RCVBUFFORCE (33): root may exceed net.core.rmem_max.
    sock.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 64 << 20)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(hostport(a.bind))
    sock.settimeout(0.5)
    if a.ready:
        open(a.ready, "w").close()  # bound: the sender may start
    seen = bytearray()
    owd = []
    received = dupes = 0
    first = None
    last = None
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        try:
            data, anc, _, _ = sock.recvmsg(65536, 64)
        except socket.timeout:
            if last is not None and time.monotonic() - last > a.idle:
                break
            continue
        # The kernel's receive time (CLOCK_REALTIME), moved onto
        # CLOCK_MONOTONIC by the offset between the two clocks now: this
        # process's own scheduling delay does not count.
        now = time.monotonic_ns()
        for level, kind, val in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", val[:16])
                off = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.monotonic_ns()
                now = sec * 1_000_000_000 + nsec - off
        if len(data) < HDR.size:
            continue
        seq, sent = HDR.unpack_from(data)
        last = time.monotonic()
        if first is None:
            first = now
        received += 1
        if seq >= len(seen):
            seen.extend(bytes(seq + 1 - len(seen)))
        if seen[seq]:
            dupes += 1
            continue
        seen[seq] = 1
        owd.append(now - sent)
    owd.sort()
    out = {"received": received, "duplicates": dupes}
    if owd:
        ms = lambda ns: round(ns / 1e6, 4)
        out.update({"owd_ms_p50": ms(pct(owd, 0.50)), "owd_ms_p90": ms(pct(owd, 0.90)),
                    "owd_ms_p99": ms(pct(owd, 0.99)), "owd_ms_max": ms(owd[-1]),
                    "owd_ms_min": ms(owd[0])})
    if a.expect:
        n = a.expect
        got = sum(seen[:n])
        lost_seqs = [i for i in range(n) if i >= len(seen) or not seen[i]]
        h = hashlib.sha256(b",".join(str(i).encode() for i in lost_seqs)).hexdigest()[:16]
        out.update({"expected": n, "lost": n - got, "loss_rate": (n - got) / n,
                    "lost_hash": h})
        if a.loss:
            lo, hi = binom_interval(n, a.loss)
            out.update({"configured_loss": a.loss, "binom99_lo": lo / n, "binom99_hi": hi / n,
                        "within_99": lo <= n - got <= hi})
    print(json.dumps(out))


def cmd_devcount(a):
    base = f"/sys/class/net/{a.dev}/statistics/"
    fb = open(base + "rx_bytes")
    fp = open(base + "rx_packets")

    def read(f):
        f.seek(0)
        return int(f.read())

    t0 = time.monotonic_ns()
    k = 0
    while True:
        now = time.monotonic_ns()
        print(now, read(fb), read(fp), flush=True)
        if now - t0 >= a.seconds * 1e9:
            break
        k += 1
        due = t0 + int(k * a.interval * 1e9)
        d = due - time.monotonic_ns()
        if d > 0:
            time.sleep(d / 1e9)


def load_counts(path):
    rows = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) == 3:
                rows.append((int(p[0]), int(p[1]), int(p[2])))
    return rows


def counts_at(rows, t_ns):
    """(bytes, packets) received by time t (linear between samples)."""
    for (t0, b0, p0), (t1, b1, p1) in zip(rows, rows[1:]):
        if t0 <= t_ns <= t1:
            f = (t_ns - t0) / (t1 - t0) if t1 > t0 else 0.0
            return b0 + (b1 - b0) * f, p0 + (p1 - p0) * f
    raise SystemExit(f"time {t_ns} outside the counted window")


def bytes_at(rows, t_ns):
    return counts_at(rows, t_ns)[0]


def cmd_rate(a):
    rows = load_counts(a.file)
    t0 = rows[0][0] + int(a.skip * 1e9)
    t1 = t0 + int(a.seconds * 1e9)
    b0, p0 = counts_at(rows, t0)
    b1, p1 = counts_at(rows, t1)
    dev_bytes, pkts = b1 - b0, p1 - p0
    ip_bytes = dev_bytes - a.l2 * pkts
    print(json.dumps({"device_mbps": round(dev_bytes * 8 / a.seconds / 1e6, 4),
                      "ip_mbps": round(ip_bytes * 8 / a.seconds / 1e6, 4),
                      "packets": int(pkts), "seconds": a.seconds}))


def trace_rates(path, bin_s, seconds):
    """The trace's mean rate (Mbit/s) per bin from its first sample:
    mahimahi = 1500-byte opportunities per bin; `time_s mbps` = step
    function, each sample held until the next (the last for one median gap)."""
    nbins = int(seconds / bin_s)
    vals = []
    with open(path) as f:
        for line in f:
            s = line.strip()
            if not s or s.startswith("#") or s[0].isalpha():
                continue
            vals.append([float(x) for x in s.replace(",", " ").split()])
    if len(vals[0]) == 1:  # mahimahi, ms stamps
        t0 = vals[0][0]
        out = [0.0] * nbins
        for (ms,) in vals:
            i = int((ms - t0) / 1000 / bin_s)
            if i < nbins:
                out[i] += 1500 * 8
        return [x / bin_s / 1e6 for x in out]
    t0 = vals[0][0]
    starts = [v[0] - t0 for v in vals]
    rates = [v[1] for v in vals]
    gaps = sorted(b - a for a, b in zip(starts, starts[1:]))
    ends = starts[1:] + [starts[-1] + gaps[len(gaps) // 2]]
    out = []
    for i in range(nbins):
        lo, hi = i * bin_s, (i + 1) * bin_s
        w = 0.0
        for s, e, r in zip(starts, ends, rates):
            if e <= lo or s >= hi:
                continue
            w += r * (min(e, hi) - max(s, lo))
        out.append(w / bin_s)
    return out


def pearson(x, y):
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy)


def cmd_corr(a):
    rows = load_counts(a.file)
    want = trace_rates(a.trace, a.bin, a.seconds)
    got = []
    for i in range(len(want)):
        t0 = a.epoch + int(i * a.bin * 1e9)
        t1 = t0 + int(a.bin * 1e9)
        if t0 < rows[0][0] or t1 > rows[-1][0]:
            got.append(None)  # outside the counted window
            continue
        got.append((bytes_at(rows, t1) - bytes_at(rows, t0)) * 8 / a.bin / 1e6)
    # Skip --skip seconds after the first counted bin (the sender starting).
    first = next(i for i, g in enumerate(got) if g is not None)
    keep = [i for i, g in enumerate(got) if g is not None and i >= first + int(a.skip / a.bin)]
    w, g = [want[i] for i in keep], [got[i] for i in keep]
    r = pearson(w, g)
    mw, mg = sum(w) / len(w), sum(g) / len(g)
    mae = sum(abs(x - y) for x, y in zip(w, g)) / len(w)
    if a.dump:
        with open(a.dump, "w") as f:
            f.write("bin\ttrace_mbps\tdelivered_mbps\n")
            for i in keep:
                f.write(f"{i}\t{want[i]:.4f}\t{got[i]:.4f}\n")
    print(json.dumps({"bins": len(w), "first_bin": keep[0], "pearson": round(r, 4), "trace_mean_mbps": round(mw, 3),
                      "delivered_mean_mbps": round(mg, 3),
                      "delivered_over_trace": round(mg / mw, 4) if mw else None,
                      "mean_abs_err_mbps": round(mae, 3)}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send")
    s.add_argument("--to", required=True)
    s.add_argument("--pps", type=float, required=True)
    s.add_argument("--size", type=int, default=100)
    s.add_argument("--count", type=int)
    s.add_argument("--seconds", type=float, default=10)
    r = sub.add_parser("recv")
    r.add_argument("--bind", required=True)
    r.add_argument("--seconds", type=float, required=True)
    r.add_argument("--idle", type=float, default=3.0)
    r.add_argument("--expect", type=int)
    r.add_argument("--loss", type=float)
    r.add_argument("--ready", help="create this file once the socket is bound")
    d = sub.add_parser("devcount")
    d.add_argument("--dev", required=True)
    d.add_argument("--seconds", type=float, required=True)
    d.add_argument("--interval", type=float, default=0.1)
    ra = sub.add_parser("rate")
    ra.add_argument("file")
    ra.add_argument("--skip", type=float, default=1)
    ra.add_argument("--seconds", type=float, required=True)
    ra.add_argument("--l2", type=int, default=0,
                    help="link header bytes the device counts per packet (veth: 14, TUN: 0)")
    c = sub.add_parser("corr")
    c.add_argument("file")
    c.add_argument("--trace", required=True)
    c.add_argument("--epoch", type=int, required=True)
    c.add_argument("--bin", type=float, default=1.0)
    c.add_argument("--seconds", type=float, required=True)
    c.add_argument("--skip", type=float, default=0)
    c.add_argument("--dump")
    a = p.parse_args()
    {"send": cmd_send, "recv": cmd_recv, "devcount": cmd_devcount, "rate": cmd_rate,
     "corr": cmd_corr}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
