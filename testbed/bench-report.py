#!/usr/bin/env python3
"""Turns a bench-pipe.sh output directory into markdown tables and an SVG.

usage: testbed/bench-report.py OUTDIR [SVG_PATH]
(OUTDIR/wan.csv, from `bench-pipe.sh wan`, gives the issue 11 tables.)
Prints markdown to stdout. Standard library only.
"""
import csv
import json
import os
import re
import sys
from collections import defaultdict


def static_tables(out):
    path = os.path.join(out, "static.csv")
    if not os.path.exists(path):
        return
    rows = list(csv.DictReader(open(path)))
    by_setup = defaultdict(list)
    for r in rows:
        by_setup[r["setup"]].append(r)
    for setup, rs in by_setup.items():
        total = float(rs[0]["sum_bps"])
        refs = defaultdict(list)
        for r in rs:
            if r["label"] in ("mptcp", "single-tcp"):
                refs[r["label"]].append(float(r["bps"]) / total)
        refs = {k: sum(v) / len(v) for k, v in refs.items()}
        fastest = float(setup.split("+")[0]) * 1e6
        # What one TCP connection gets from a channel of rate R: the
        # tbf rate counts IP/TCP headers, so goodput is below R.
        ceiling = refs.get("single-tcp", 0) * total / fastest
        print(f"\n### {setup} Mbit/s (sum {total / 1e6:.0f} Mbit/s): utilization of the sum\n")
        print("| connections | round-robin | weighted | adaptive |")
        print("| --- | --- | --- | --- |")
        grid = defaultdict(dict)
        for r in rs:
            if r["label"] in ("round-robin", "weighted", "adaptive"):
                grid[int(r["connections"])][r["label"]] = float(r["bps"]) / total
        means = defaultdict(list)
        for n in sorted(grid):
            cells = []
            for m in ("round-robin", "weighted", "adaptive"):
                v = grid[n].get(m)
                if v is not None:
                    means[m].append(v)
                cells.append(f"{v * 100:.1f} %" if v is not None else "–")
            print(f"| {n} | " + " | ".join(cells) + " |")
        avg = [f"**{sum(means[m]) / len(means[m]) * 100:.1f} %**" if means[m] else "–"
               for m in ("round-robin", "weighted", "adaptive")]
        mins = [f"{min(means[m]) * 100:.1f} %" if means[m] else "–"
                for m in ("round-robin", "weighted", "adaptive")]
        print("| mean | " + " | ".join(avg) + " |")
        print("| min | " + " | ".join(mins) + " |")
        if refs:  # REFS=0 runs have no references: say nothing of them
            print(f"\nSame run: kernel MPTCP (1 connection, one subflow per channel) "
                  f"**{refs.get('mptcp', 0) * 100:.1f} %**, single TCP on the fastest channel "
                  f"{refs.get('single-tcp', 0) * 100:.1f} % of the sum "
                  f"(= {ceiling * 100:.1f} % of that channel's rate: the goodput ceiling of a "
                  f"tbf-shaped channel, headers included in the rate).")
        extra = [r for r in rs if r["label"] in ("iperf3-tbf", "iperf3-veth", "adaptive-veth")]
        if extra:
            print("\nWhat the machine carries, same run (Gbit/s; % of the sum; 1-minute load): "
                  + "; ".join(f"{r['label']} {float(r['bps']) / 1e9:.2f} ({float(r['bps']) / total * 100:.1f} %; "
                              f"load {r['load']})" for r in extra)
                  + ". iperf3: one stream per channel at once; -veth: the tbf qdiscs removed.")


def mbit(rate):
    """'300mbit' or '3gbit' in Mbit/s."""
    r = rate.lower()
    return int(r[:-4]) * 1000 if r.endswith("gbit") else int(r.replace("mbit", ""))


def dyn_meta(out):
    """(static channel, flapping channel's first rate) in Mbit/s; issue 4's
    runs (no dyn.meta) were 100 and 200."""
    p = os.path.join(out, "dyn.meta")
    if os.path.exists(p):
        a, b = open(p).read().split()
        return int(a), int(b)
    return 100, 200


def load_series(out, mode):
    log = os.path.join(out, f"dyn-{mode}.log")
    if not os.path.exists(log):
        return None
    pts = []
    for line in open(log):
        p = line.split()
        if len(p) == 2:
            pts.append((float(p[0]), int(p[1])))
    # Rate over 1 s windows, sampled at each point.
    series = []
    j = 0
    for i, (t, b) in enumerate(pts):
        while pts[j][0] < t - 1.0:
            j += 1
        if t - pts[j][0] >= 0.5:
            series.append((t, (b - pts[j][1]) * 8 / (t - pts[j][0]) / 1e6))
    flaps = []
    fp = os.path.join(out, f"dyn-{mode}.flaps")
    start = float(open(os.path.join(out, f"dyn-{mode}.start")).read())
    for line in open(fp):
        p = line.split()
        if len(p) == 3:
            flaps.append((float(p[0]) - start, mbit(p[2])))
    return series, flaps


def dynamic(out, svg_path):
    modes = [m for m in ("weighted", "adaptive", "round-robin") if load_series(out, m)]
    if not modes:
        return
    base, low = dyn_meta(out)
    high = max((r for _, r in load_series(out, modes[0])[1]), default=low)
    u = (lambda v: f"{v / 1000:g} Gbit/s") if base >= 1000 else (lambda v: f"{v} Mbit/s")
    print(f"\n### Dynamic: {u(base)} + {u(low)}|{u(high)} switching every 20 s, 8 connections\n")
    print("| mode | mean of momentary sum | time to ≥ 90 % after each change (s) | receiver peak RSS |")
    print("| --- | --- | --- | --- |")
    data = {}
    for m in modes:
        series, flaps = load_series(out, m)
        data[m] = (series, flaps)

        def cap(t):
            c = low
            for ft, r in flaps:
                if ft <= t:
                    c = r
            return base + c

        usable = [(t, v) for t, v in series if t > 2 and t < series[-1][0] - 1]
        util = sum(v / cap(t) for t, v in usable) / max(1, len(usable))
        delays = []
        for ft, r in flaps:
            hit = next((t - ft for t, v in series if t >= ft and v >= 0.9 * (base + r)), None)
            delays.append("–" if hit is None else f"{hit:.1f}")
        rp = os.path.join(out, f"dyn-{m}.rss")
        words = open(rp).read().split() if os.path.exists(rp) else []
        rss = words[-1] if words else "?"
        print(f"| {m} | {util * 100:.1f} % | {', '.join(delays)} | {int(rss) / 1024:.0f} MiB |"
              if rss.isdigit() else f"| {m} | {util * 100:.1f} % | {', '.join(delays)} | ? |")
    if svg_path:
        write_svg(svg_path, data, base, low)


def write_svg(path, data, base=100, low=200):
    w, h, pad = 800, 360, 50
    tmax = max(s[-1][0] for s, _ in data.values())
    vmax = 450.0 * base / 100
    X = lambda t: pad + (w - 2 * pad) * t / tmax
    Y = lambda v: h - pad - (h - 2 * pad) * v / vmax
    colors = {"weighted": "#d62728", "adaptive": "#1f77b4", "round-robin": "#7f7f7f"}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>']
    for v in range(0, int(vmax) + 1, 100 * base // 100):
        out.append(f'<line x1="{pad}" x2="{w - pad}" y1="{Y(v)}" y2="{Y(v)}" stroke="#ddd"/>')
        out.append(f'<text x="{pad - 8}" y="{Y(v) + 4}" text-anchor="end">{v}</text>')
    for t in range(0, int(tmax) + 1, 20):
        out.append(f'<text x="{X(t)}" y="{h - pad + 16}" text-anchor="middle">{t}</text>')
    # Capacity (sum of channel rates).
    _, flaps = next(iter(data.values()))
    pts, c, t0 = [], base + low, 0.0
    for ft, r in flaps + [(tmax, None)]:
        pts += [(t0, c), (min(ft, tmax), c)]
        if r is not None:
            c, t0 = base + r, ft
    out.append('<polyline fill="none" stroke="black" stroke-dasharray="4 3" points="'
               + " ".join(f"{X(t):.1f},{Y(v):.1f}" for t, v in pts) + '"/>')
    for m, (series, _) in data.items():
        out.append(f'<polyline fill="none" stroke="{colors[m]}" stroke-width="1.5" points="'
                   + " ".join(f"{X(t):.1f},{Y(v):.1f}" for t, v in series) + '"/>')
    ly = pad - 20
    for i, m in enumerate(list(data) + ["sum of channels"]):
        col = colors.get(m, "black")
        out.append(f'<line x1="{pad + i * 160}" x2="{pad + i * 160 + 20}" y1="{ly}" y2="{ly}" stroke="{col}" stroke-width="2"/>')
        out.append(f'<text x="{pad + i * 160 + 25}" y="{ly + 4}">{m}</text>')
    out.append(f'<text x="{w / 2}" y="{h - 10}" text-anchor="middle">time (s)</text>')
    out.append(f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" text-anchor="middle">Mbit/s (1 s average)</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


def loopback(out):
    path = os.path.join(out, "loopback.csv")
    if not os.path.exists(path):
        return
    rows = list(csv.DictReader(open(path)))
    print("\n### Loopback, no shaping: braid vs iperf3 in the same run (Gbit/s; median of repetitions)\n")
    print("| N | iperf3 -P N | braid -n N | braid / iperf3 | braid recv peak RSS |")
    print("| --- | --- | --- | --- | --- |")
    for n in ("1", "2", "4"):
        ip = sorted(float(r["bps"]) for r in rows if r["tool"] == "iperf3" and r["connections"] == n)
        br = sorted(float(r["bps"]) for r in rows if r["tool"] == "braid" and r["connections"] == n)
        rss = max((int(r["rss_kib"]) for r in rows if r["tool"] == "braid" and r["connections"] == n), default=0)
        if ip and br:
            mi, mb = ip[len(ip) // 2], br[len(br) // 2]
            print(f"| {n} | {mi / 1e9:.1f} | {mb / 1e9:.1f} | {mb / mi * 100:.0f} % | {rss / 1024:.0f} MiB |")
    print("\nAll repetitions: " + "; ".join(
        f"{r['tool']} N={r['connections']}: {float(r['bps']) / 1e9:.1f} (load {r['load']})" for r in rows))


def wan_tag(out, setup, label, n):
    """The per-run file stem bench-pipe.sh wan_one writes."""
    safe = re.sub(r"[^A-Za-z0-9+._-]", "_", setup)
    return os.path.join(out, "wan", f"{safe}-{label}-n{n}")


def wan(out):
    """Issue 11: one row per setup, columns per mode (utilization of the
    channel sum), the TCP ceiling (sum of one TCP connection per channel
    alone), and receiver memory per point."""
    path = os.path.join(out, "wan.csv")
    if not os.path.exists(path):
        return
    rows = list(csv.DictReader(open(path)))
    setups = []
    for r in rows:
        if r["setup"] not in setups:
            setups.append(r["setup"])
    labels = ("adaptive", "weighted", "round-robin", "mptcp")
    ccs = sorted({r["cc"] for r in rows})
    print(f"\n### Wide-area channels: utilization of the channel sum "
          f"(congestion control: {', '.join(ccs)})\n")
    print("| setup | sum (Mbit/s) | " + " | ".join(labels)
          + " | TCP ceiling | adaptive / ceiling | adaptive ≥ 90 %? | adaptive > MPTCP? |")
    print("| --- | --- | " + " | ".join("---" for _ in labels) + " | --- | --- | --- | --- |")
    many = False
    for setup in setups:
        rs = {r["label"]: r for r in rows if r["setup"] == setup}
        runs = defaultdict(list)
        for r in rows:
            if r["setup"] == setup and float(r["sum_bps"]) > 0:
                runs[r["label"]].append(float(r["bps"]) / float(r["sum_bps"]))
        many |= any(len(v) > 1 for v in runs.values())
        util = {k: sorted(v)[len(v) // 2] for k, v in runs.items()}
        sums = sorted(float(r["sum_bps"]) / 1e6 for r in rs.values())
        sumtxt = f"{sums[0]:.1f}" if sums[-1] - sums[0] < 0.05 else f"{sums[0]:.1f}–{sums[-1]:.1f}"
        cells = [f"{util[k] * 100:.1f} %" if k in util else "–" for k in labels]
        singles = [v for k, v in util.items() if k.startswith("single-tcp")]
        ceil = sum(singles) if len(singles) >= 2 else None
        a = util.get("adaptive")
        m = util.get("mptcp")
        cells.append("–" if ceil is None else f"{ceil * 100:.1f} %")
        cells.append("–" if ceil is None or a is None else f"{a / ceil * 100:.1f} %")
        cells.append("–" if a is None else ("yes" if a >= 0.9 else "**no**"))
        cells.append("–" if a is None or m is None else ("yes" if a > m else "**no**"))
        print(f"| {setup} | {sumtxt} | " + " | ".join(cells) + " |")
    if many:
        print("\nA setup run more than once shows the median run (the upper one of an even "
              "count); every run (utilization, 1-minute load): " + "; ".join(
                  f"{setup} {k}: " + ", ".join(
                      f"{float(r['bps']) / float(r['sum_bps']) * 100:.1f} % ({r['load']})"
                      for r in rows if r["setup"] == setup and r["label"] == k)
                  for setup in setups for k in ("adaptive", "mptcp")
                  if sum(1 for r in rows if r["setup"] == setup and r["label"] == k) > 1) + ".")
    def share(setup, label):
        v = sorted(float(r["bps"]) / float(r["sum_bps"]) for r in rows
                   if r["setup"] == setup and r["label"] == label)
        return v[len(v) // 2]

    print("\nTCP ceiling: one TCP connection alone on each channel (same run, same "
          "length at that channel's rate), summed; single-TCP shares of the sum per channel: "
          + "; ".join(
              f"{setup}: " + " + ".join(
                  f"{share(setup, k) * 100:.1f} %"
                  for k in sorted({r["label"] for r in rows
                                   if r["setup"] == setup and r["label"].startswith("single-tcp")}))
              for setup in setups) + ".")
    print("\nReceiver memory per point: reorder-window peak (`reorder_peak_bytes`) / "
          "peak RSS (`/usr/bin/time -f %M`) in MiB, the largest over the setup's runs; "
          "adaptive also the largest automatic window the sender computed (last run).\n")
    print("| setup | " + " | ".join(labels) + " | adaptive: auto window peak |")
    print("| --- | " + " | ".join("---" for _ in labels) + " | --- |")
    for setup in setups:
        rs = {r["label"]: r for r in rows if r["setup"] == setup}
        cells = []
        for k in labels:
            mine = [r for r in rows if r["setup"] == setup and r["label"] == k]
            cells.append("–" if not mine else
                         f"{max(int(r['reorder_peak_bytes']) for r in mine) / 2**20:.1f} / "
                         f"{max(int(r['recv_rss_kib']) for r in mine) / 1024:.0f}")
        auto = "–"
        r = rs.get("adaptive")
        if r is not None:
            sj = wan_tag(out, setup, "adaptive", r["connections"]) + ".send.json"
            if os.path.exists(sj):
                d = json.load(open(sj))
                if "window_auto_peak_bytes" in d:
                    auto = f"{d['window_auto_peak_bytes'] / 2**20:.1f} MiB"
        print(f"| {setup} | " + " | ".join(cells) + f" | {auto} |")


if __name__ == "__main__":
    out = sys.argv[1]
    svg = sys.argv[2] if len(sys.argv) > 2 else None
    static_tables(out)
    dynamic(out, svg)
    loopback(out)
    wan(out)
