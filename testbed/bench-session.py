#!/usr/bin/env python3
"""Summarizes testbed/bench-session.sh's OUTDIR (issue 12's benchmarks).

Reads the sink's `win`/`gap`/`total` lines, the source's `event` lines and
each run's `.meta` (load, kill time, relay CPU ticks) and prints one table
per part that was run. Usage: bench-session.py OUTDIR [--warm SECONDS]
"""
import glob
import json
import math
import os
import re
import statistics
import sys

OUT = sys.argv[1]
WARM = float(sys.argv[sys.argv.index('--warm') + 1]) if '--warm' in sys.argv else 10.0
T3 = [('Atom', 3.249), ('Bond1', 22.148), ('Bond2', 70.34)]


def meta(tag):
    m = {}
    try:
        for line in open(tag + '.meta'):
            k, _, v = line.strip().partition(' ')
            m[k] = v
    except FileNotFoundError:
        pass
    return m


def sink(tag, bins=None):
    """The sink's 1 s windows, gaps and totals; fills `bins` (stream ->
    {10 ms bin: bytes}) when given."""
    wins, gaps, total = {}, {}, {}
    try:
        lines = open(tag + '.sink').read().split('\n')
    except FileNotFoundError:
        return wins, gaps, total
    for line in lines:
        f = line.split()
        if not f:
            continue
        if f[0] == 'win':
            wins.setdefault(int(f[1]), {})[int(f[2])] = int(f[3])
        elif f[0] == 'bin' and bins is not None:
            bins.setdefault(int(f[1]), {})[int(f[2])] = int(f[3])
        elif f[0] == 'gap':
            gaps.setdefault(int(f[1]), []).append((int(f[2]), int(f[3])))
        elif f[0] == 'total':
            total[int(f[1])] = (int(f[2]), int(f[3]), int(f[4]))
    return wins, gaps, total


def source(tag):
    start, end, events = None, None, []
    try:
        lines = open(tag + '.source').read().split('\n')
    except FileNotFoundError:
        return start, end, events
    for line in lines:
        f = line.split(' ', 2)
        if f[0] == 'start':
            start = int(f[1])
        elif f[0] == 'end':
            end = int(f[1])
        elif f[0] == 'event':
            events.append((int(f[1]), f[2]))
    return start, end, events


def pct(v, q):
    s = sorted(v)
    if not s:
        return float('nan')
    i = q * (len(s) - 1)
    lo, hi = math.floor(i), math.ceil(i)
    return s[lo] + (s[hi] - s[lo]) * (i - lo)


def met_of(tag):
    """The sink session's own share of windows met per stream (its `met`
    lines: braid's one definition, over the whole run)."""
    met = {}
    try:
        for line in open(tag + '.sink'):
            f = line.split()
            if len(f) == 3 and f[0] == 'met':
                met[int(f[1])] = float(f[2])
    except FileNotFoundError:
        pass
    return met


def table3():
    tags = sorted(glob.glob(os.path.join(OUT, 't3-*.source')))
    if not tags:
        return
    print(f'## Table III on real sockets (1 s windows, first {WARM:.0f} s after the source started not counted)')
    print('| scheduler | stream | target Mbit/s | p95 (5th pct) Mbit/s | p95 / target | mean | std | windows | met (sink) | load start/end |')
    print('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |')
    stds = {}
    for src in tags:
        tag = src[:-len('.source')]
        sched = tag.rsplit('t3-', 1)[1]
        m = meta(tag)
        start, end, _ = source(tag)
        wins, _, _ = sink(tag)
        met = met_of(tag)
        if start is None or end is None:
            print(f'| {sched} | (no run: {m}) |')
            continue
        first = math.ceil(start / 1000 + WARM)
        last = math.floor(end / 1000) - 1  # the last whole second
        for i, (name, target) in enumerate(T3, 1):
            if i not in wins:
                continue
            w = wins[i]
            v = [w.get(s, 0) * 8 / 1e6 for s in range(first, last + 1)]
            if not v:
                continue
            p5 = pct(v, 0.05)
            mean = statistics.fmean(v)
            sd = statistics.pstdev(v)
            stds[(sched, name)] = sd
            # Bond2 is best effort: no windows to meet.
            share = f'{met[i]:.1%}' if i in met and name != 'Bond2' else '-'
            print(f'| {sched} | {name} | {target:.3f} | {p5:.3f} | {p5 / target:.1%} | {mean:.3f} | {sd:.4f} | {len(v)} | {share} | {m.get("load_start")}/{m.get("load_end")} |')
    std_check(stds)
    print()
    phases(tags)


def std_check(stds):
    """PGOS's std against MSFQ's / 5, per run suffix (pgos-X vs msfq-X)."""
    for (sched, name), p in sorted(stds.items()):
        if not sched.startswith('pgos') or name not in ('Atom', 'Bond1'):
            continue
        q = stds.get(('msfq' + sched[len('pgos'):], name))
        if q is not None:
            print(f'- {sched} {name}: std PGOS {p:.4f} vs MSFQ/5 {q / 5:.4f} -> {"ok" if p <= q / 5 else "MISS"}')


def phases(tags):
    """The same windows placed at every 10 ms phase of the second.

    Frames arrive every 40 ms at a phase fixed for the run, so a 1 s window
    whose edge falls a few ms from a frame's arrival moves that whole frame
    (4 % of the second) to the next window at the slightest jitter; where
    the edges fall is an accident of the start time, the same for no two
    runs. Over all 100 phases the median is a figure of the schedule, not
    of that accident; the range shows how much the accident is worth.
    """
    rows, stds = [], {}
    for src in tags:
        tag = src[:-len('.source')]
        sched = tag.rsplit('t3-', 1)[1]
        start, end, _ = source(tag)
        bins = {}
        sink(tag, bins)
        if start is None or end is None or not bins:
            continue
        first = math.ceil(start / 1000 + WARM) * 100  # in 10 ms bins
        last = (math.floor(end / 1000) - 1) * 100  # start of the last whole window at phase 0
        for i, (name, target) in enumerate(T3[:2], 1):
            b = bins.get(i)
            if not b:
                continue
            p95s, sds = [], []
            for ph in range(100):
                v = [sum(b.get(w + k, 0) for k in range(100)) * 8 / 1e6
                     for w in range(first + ph, last + ph - 99, 100)]
                if len(v) < 2:
                    continue
                p95s.append(pct(v, 0.05) / target)
                sds.append(statistics.pstdev(v))
            if not p95s:
                continue
            stds[(sched, name)] = statistics.median(sds)
            rows.append(f'| {sched} | {name} | {statistics.median(p95s):.1%} | {min(p95s):.1%}–{max(p95s):.1%} '
                        f'| {statistics.median(sds):.4f} | {min(sds):.4f}–{max(sds):.4f} |')
    if not rows:
        return
    print('## Table III, 1 s windows at every 10 ms phase (median over the 100 phases, and the range)')
    print('| scheduler | stream | p95 / target, median | range | std, median | range |')
    print('| --- | --- | --- | --- | --- | --- |')
    print('\n'.join(rows))
    std_check(stds)
    print()


def relay():
    tags = sorted(glob.glob(os.path.join(OUT, 'relay-*.sink')))
    if not tags:
        return
    print('## Relay throughput (one bulk best-effort stream; sink bytes / (last - first message))')
    print('| where | path | rep | Mbit/s | relay CPU s | relay CPU s per Gbit/s·s | source / sink CPU s per Gbit | load start/end |')
    print('| --- | --- | --- | --- | --- | --- | --- | --- |')
    agg = {}
    for t in tags:
        tag = t[:-len('.sink')]
        where, label, rep = os.path.basename(tag).split('-')[1:4]
        m = meta(tag)
        _, _, total = sink(tag)
        if 1 not in total:
            print(f'| {where} | {label} | {rep} | (no data) | | | |')
            continue
        b, f0, f1 = total[1]
        secs = max(f1 - f0, 1) / 1000
        mbps = b * 8 / secs / 1e6
        agg.setdefault((where, label), []).append(mbps)
        cpu, per = '', ''
        if 'relay_ticks_start' in m and 'relay_ticks_end' in m:
            c = (int(m['relay_ticks_end']) - int(m['relay_ticks_start'])) / int(m.get('clk_tck', 100))
            cpu = f'{c:.2f}'
            gbit = b * 8 / 1e9
            per = f'{c / gbit:.2f}'  # CPU seconds per Gbit carried = CPU share at 1 Gbit/s
        ends = []
        for who in ('source', 'sink'):
            try:
                u, st = open(f'{tag}.{who}.time').read().split()[-2:]
                ends.append(f'{(float(u) + float(st)) / (b * 8 / 1e9):.2f}')
            except (FileNotFoundError, ValueError):
                ends.append('–')
        print(f'| {where} | {label} | {rep} | {mbps:.0f} | {cpu} | {per} | {" / ".join(ends)} | {m.get("load_start")}/{m.get("load_end")} |')
    for where in ('loopback', 'emu'):
        d, r = agg.get((where, 'direct')), agg.get((where, 'relay'))
        if d and r:
            dm, rm = statistics.median(d), statistics.median(r)
            print(f'- {where}: median direct {dm:.0f} Mbit/s, through the relay {rm:.0f} Mbit/s = {rm / dm:.1%} of direct')
    print()


def failover():
    tags = sorted(glob.glob(os.path.join(OUT, 'fo-*.source')), key=lambda s: int(re.findall(r'fo-(\d+)', s)[0]))
    if not tags:
        return
    print('## Failover: kill -9 of the relay (ms after the kill)')
    print('| run | PathDown | first remap after | longest gap in critical stream | mapped on relay path before kill | srtt relay/direct | load |')
    print('| --- | --- | --- | --- | --- | --- | --- |')
    det, rem, gap = [], [], []
    for src in tags:
        tag = src[:-len('.source')]
        m = meta(tag)
        kill = int(m.get('kill_ms', 0))
        _, _, events = source(tag)
        _, gaps, _ = sink(tag)
        down = next((t - kill for t, e in events if t >= kill and e.startswith('PathDown { path: PathId(0)')), None)
        remap = next((t - kill for t, e in events if t >= kill and down is not None and t - kill >= down
                      and (e.startswith('Remapped') or e.startswith('StreamMapped'))), None)
        mapped = [e for t, e in events if t < kill and e.startswith('StreamMapped { stream: StreamId(1)')]
        on_relay = 'PathId(0)' in mapped[-1] if mapped else None
        g = max((l for s, l in gaps.get(1, []) if kill - 1000 <= s <= kill + 5000), default=0)
        srtt = re.findall(r'srtt: ([0-9.]+\w+)', open(src).read())
        print(f'| {tag.rsplit("-", 1)[1]} | {down} | {remap} | {g} | {on_relay} | {"/".join(srtt)} | {m.get("load_start")} |')
        if down is not None:
            det.append(down)
        if remap is not None:
            rem.append(remap)
        gap.append(g)
    for name, v in (('detection', det), ('re-mapping', rem), ('longest gap', gap)):
        if v:
            print(f'- {name}: n={len(v)} median {statistics.median(v):.0f} ms, max {max(v)} ms')
    print()


def bulk3():
    tags = sorted(glob.glob(os.path.join(OUT, 'bulk-*.meta')))
    if not tags:
        return
    print('## Bulk over three channels')
    print('| setup | sender | Mbit/s | load start/end |')
    print('| --- | --- | --- | --- |')
    res = {}
    for t in tags:
        tag = t[:-len('.meta')]
        _, label, who = os.path.basename(tag).split('-')
        m = meta(tag)
        mbps = None
        if who == 'session':
            _, _, total = sink(tag)
            if 1 in total:
                b, f0, f1 = total[1]
                mbps = b * 8 / max(f1 - f0, 1) * 1000 / 1e6
        else:
            try:
                mbps = json.load(open(tag + '.json'))['bps'] / 1e6
            except (FileNotFoundError, KeyError, ValueError):
                pass
        res[(label, who)] = mbps
        print(f'| {label} | {who} | {mbps if mbps is None else round(mbps, 1)} | {m.get("load_start")}/{m.get("load_end")} |')
    for label in ('low', 'high'):
        s, b, p = res.get((label, 'session')), res.get((label, 'send')), res.get((label, 'mptcp'))
        if s and b:
            print(f'- {label}: session / braid send = {s / b:.1%}' + (f'; session / MPTCP = {s / p:.1%}' if p else ''))
    print()


table3()
relay()
failover()
bulk3()
