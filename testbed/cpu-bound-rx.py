#!/usr/bin/env python3
"""A TCP receiver whose per-byte work is CPU-bound (seed 004 Fig. 11's
"receiving process" under host load): it compresses every chunk it reads
with zlib, as a decompressing or analysing application would, and prints
its goodput once a second in kbit/s.

  cpu-bound-rx.py listen PORT SERIES_FILE [LEVEL]   receiver
  cpu-bound-rx.py send HOST PORT SECONDS            sender (cubic, as fast as it can)
"""
import os
import socket
import sys
import time
import zlib


def listen(port, series, level):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    conn, _ = srv.accept()
    n, last = 0, time.time()
    with open(series, "w") as out:
        while True:
            b = conn.recv(65536)
            if not b:
                break
            zlib.compress(b, level)
            n += len(b)
            now = time.time()
            if now - last >= 1.0:
                out.write(f"{n * 8 / (now - last) / 1000:.0f}\n")
                out.flush()
                n, last = 0, now


def send(host, port, secs):
    s = socket.create_connection((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"cubic")
    buf = os.urandom(1 << 20)
    end = time.time() + secs
    while time.time() < end:
        s.sendall(buf)
    s.close()


if __name__ == "__main__":
    if sys.argv[1] == "listen":
        listen(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 6)
    elif sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit("usage: cpu-bound-rx.py listen PORT SERIES [LEVEL] | send HOST PORT SECONDS")
