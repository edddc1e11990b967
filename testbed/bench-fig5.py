#!/usr/bin/env python3
"""testbed/bench-fig5.py: the helpers of testbed/bench-fig5.sh (seed 004
Fig. 5, issue 14): a per-second sampler, the event-driven htb classes used
when the broker has no --enforce, and the per-phase report.

  bench-fig5.py sample OUT NS DEV        per-second CSV OUT/samples.csv
  bench-fig5.py classes OUT NS DEV       reads `braid reserve watch --format
                                         json` on stdin, sets htb class rates
  bench-fig5.py report OUT               the per-phase table and the checks

The sampler writes long rows `t,name,bytes,drops`: every htb class of DEV
(wire bytes, drops) and every receiver named in OUT/recv-NAME.pid (bytes
it wrote, /proc/PID/io wchar: the payload delivered, output is /dev/null).
"""
import json
import os
import subprocess
import sys
import time

IDLE_RATE = "100kbit"  # an idle premium class (no provisioned reservation)


def now_rel(out):
    with open(os.path.join(out, "t0")) as f:
        return time.time() - float(f.read())


def tc_classes(ns, dev):
    """{classid: (bytes, drops)} of the htb classes on dev."""
    text = subprocess.run(
        ["ip", "netns", "exec", ns, "tc", "-s", "class", "show", "dev", dev],
        capture_output=True, text=True, check=False).stdout
    res, cur = {}, None
    for line in text.splitlines():
        w = line.split()
        if len(w) >= 3 and w[0] == "class" and w[1] == "htb":
            cur = w[2]
        elif w and w[0] == "Sent" and cur is not None:
            drops = int(w[w.index("(dropped") + 1].rstrip(",")) if "(dropped" in w else 0
            res[cur] = (int(w[1]), drops)
    return res


def sample(out, ns, dev):
    last = {}
    with open(os.path.join(out, "samples.csv"), "w") as f:
        f.write("t,name,bytes,drops\n")
        while True:
            t = now_rel(out)
            for cid, (b, d) in tc_classes(ns, dev).items():
                f.write(f"{t:.2f},class {cid},{b},{d}\n")
            for name in os.listdir(out):
                if not (name.startswith("recv-") and name.endswith(".pid")):
                    continue
                flow = name[5:-4]
                try:
                    with open(os.path.join(out, name)) as p:
                        pid = p.read().strip()
                    with open(f"/proc/{pid}/io") as io:
                        for line in io:
                            if line.startswith("wchar:"):
                                last[flow] = int(line.split()[1])
                except OSError:
                    pass  # not started yet, or finished: keep its last count
                if flow in last:
                    f.write(f"{t:.2f},recv {flow},{last[flow]},0\n")
            f.flush()
            time.sleep(1.0 - (time.time() % 1.0))


def parse_rate(text):
    """'40.5mbit', '40.5 Mbit/s', '8100000' -> bit/s."""
    t = text.strip().lower().replace(" ", "").replace("/s", "")
    for unit, mult in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)):
        if t.endswith(unit):
            return float(t[: -len(unit)]) * mult
    return float(t)


def classes(out, ns, dev):
    """Event-driven enforcement: OUT/class-ID names the htb class of
    reservation ID; while the reservation is committed and provisioned its
    class gets its rate (a background one: its latest share), otherwise
    the idle rate."""
    log = open(os.path.join(out, "classes.log"), "a")
    state = {}  # id -> {"live", "background", "rate", "share", "set"}
    for line in sys.stdin:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        rid = ev.get("id")
        path = os.path.join(out, f"class-{rid}")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            cid = f.read().strip()
        st = state.setdefault(rid, {"live": False, "background": False, "rate": 0.0,
                                    "share": 0.0, "set": None})
        r = ev.get("reservation")
        if r is not None:
            st["live"] = (r.get("state") == "committed" and r.get("life") == "created"
                          and r.get("provision") == "provisioned")
            st["background"] = r.get("class") == "background"
            st["rate"] = float((r.get("committed") or {}).get("rate_bps", 0))
            if r.get("share"):
                st["share"] = parse_rate(r["share"])
        if ev.get("share"):
            st["share"] = parse_rate(ev["share"])
        bps = (st["share"] if st["background"] else st["rate"]) if st["live"] else 0.0
        rate = f"{max(bps, 1e5) / 1e3:.0f}kbit"
        if rate == st["set"]:
            continue
        st["set"] = rate
        subprocess.run(["ip", "netns", "exec", ns, "tc", "class", "change", "dev", dev,
                        "parent", "1:10", "classid", cid, "htb", "rate", rate,
                        "ceil", "100mbit", "quantum", "1514", "prio", "0"], check=False)
        log.write(f"{now_rel(out):.2f} {cid} {rate} (reservation {rid}, "
                  f"{'live' if st['live'] else 'idle'})\n")
        log.flush()


def report(out):
    cfg = json.load(open(os.path.join(out, "run.json")))
    scale = cfg["scale"]
    rows = {}
    for line in open(os.path.join(out, "samples.csv")).read().splitlines()[1:]:
        t, name, b, d = line.split(",")
        rows.setdefault(name, []).append((float(t), int(b), int(d)))
    names = cfg["names"]  # {"bg": "recv bg" ..., "premium": [...], "be": "class 1:20"}

    def mean_mbit(name, a, b):
        pts = [p for p in rows.get(name, []) if a <= p[0] <= b]
        if len(pts) < 2:
            return 0.0
        return (pts[-1][1] - pts[0][1]) * 8 / (pts[-1][0] - pts[0][0]) / 1e6

    def drops(name, a, b):
        pts = [p for p in rows.get(name, []) if a <= p[0] <= b]
        return pts[-1][2] - pts[0][2] if len(pts) >= 2 else 0

    # The seed's phases (seconds, before scaling) and the foreground flow
    # of each: (name, reserved, sent) in Mbit/s.
    fg = {f["name"]: f for f in cfg["foreground"]}
    edges = [cfg["bg_start"], 25, 48, 75, 105, 130, 160, cfg["bg_end"], cfg["end"]]
    active = {25: "fg1", 75: "fg2", 130: "fg3"}
    trim = cfg["trim"]
    premium, link = cfg["premium_mbit"], cfg["link_mbit"]
    print(f"scale {scale}: seed times x {scale}; means over each phase less {trim} s at each edge;")
    print("goodput = payload the receiver wrote; wire = htb class bytes (headers included)")
    hdr = ("phase(seed s)", "fg res/sent", "fg goodput", "fg/sent", "fg/res", "bg share",
           "bg goodput", "bg/share", "bg/left", "bg wire/left", "premium wire", "BE wire", "prem drops")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    checks = []
    for a, b in zip(edges, edges[1:]):
        ta, tb = a * scale + trim, b * scale - trim
        if tb <= ta:
            continue
        f = fg.get(active.get(a, ""))
        bg_on = a < cfg["bg_end"]
        left = premium - (f["reserved"] if f else 0)
        share = 0.9 * left if bg_on else 0.0
        bg = mean_mbit("recv bg", ta, tb) if bg_on else 0.0
        prem = sum(mean_mbit(n, ta, tb) for n in names["premium"])
        be = mean_mbit(names["be"], ta, tb)
        pdrops = sum(drops(n, ta, tb) for n in names["premium"])
        cells = [f"{a:g}-{b:g}"]
        if f:
            g = mean_mbit("recv " + f["name"], ta, tb)
            cells += [f"{f['reserved']:g}/{f['sent']:g}", f"{g:.2f}",
                      f"{100 * g / f['sent']:.1f} %", f"{100 * g / f['reserved']:.1f} %"]
            checks.append((f"{f['name']} goodput >= 99 % of its {f['sent']:g} Mbit/s sent",
                           round(g, 2) >= round(0.99 * f["sent"], 2), f"{g:.2f}"))
        else:
            cells += ["-", "-", "-", "-"]
        if bg_on:
            # "Left to it": the premium capacity the foreground leaves
            # (its share is 90 % of that, the seed's 40.5 of 45).
            # The same on the wire (the htb class's bytes, headers in):
            # premium capacity is a wire rate.
            wire = mean_mbit(names["bg_class"], ta, tb) if names.get("bg_class") else 0.0
            cells += [f"{share:.2f}", f"{bg:.2f}", f"{100 * bg / share:.1f} %",
                      f"{100 * bg / left:.1f} %",
                      f"{100 * wire / left:.1f} %" if wire else "-"]
            checks.append((f"bg {a:g}-{b:g} goodput >= 90 % of the {left:g} Mbit/s premium left",
                           round(bg, 2) >= round(0.9 * left, 2), f"{bg:.2f}"))
            if wire:
                checks.append((f"bg {a:g}-{b:g} wire >= 90 % of the {left:g} Mbit/s premium left",
                               round(wire, 2) >= round(0.9 * left, 2), f"{wire:.2f}"))
        else:
            cells += ["-", "-", "-", "-", "-"]
        cells += [f"{prem:.2f}", f"{be:.2f}", str(pdrops)]
        checks.append((f"{a:g}-{b:g}: no premium drops", pdrops == 0, str(pdrops)))
        print("| " + " | ".join(cells) + " |")
    # The flood never takes premium capacity: in every whole second, the
    # best-effort class gets at most the link less what premium used.
    worst = 0.0
    be_pts = rows.get(names["be"], [])
    for (t0, b0, _), (t1, b1, _) in zip(be_pts, be_pts[1:]):
        be = (b1 - b0) * 8 / (t1 - t0) / 1e6
        prem = sum(mean_mbit(n, t0, t1) for n in names["premium"])
        worst = max(worst, be + prem - link)
    checks.append(("flood never above the link less premium (per second, Mbit/s over)",
                   worst <= 0.05 * link, f"{worst:.2f}"))
    for s in cfg.get("senders", []):
        print(f"sender {s['name']}: {s.get('mbit', 0):.2f} Mbit/s mean over its transfer, "
              f"{s.get('bytes', 0) / 1e6:.1f} MB")
    print("checks:")
    for what, ok, v in checks:
        print(f"  {'PASS' if ok else 'FAIL'} {what}: {v}")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "sample":
        sample(*sys.argv[2:5])
    elif cmd == "classes":
        classes(*sys.argv[2:5])
    elif cmd == "report":
        report(sys.argv[2])
    else:
        sys.exit(f"usage: {sys.argv[0]} sample|classes|report ...")
