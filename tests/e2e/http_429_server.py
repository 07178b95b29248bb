#!/usr/bin/env python3
"""An HTTP service with a limit of its own, on loopback, for the back-off tests and benchmark.

A hidden token bucket of RATE requests a second (burst BURST): a request beyond it is answered
429 with "Retry-After: RETRY_AFTER". Each request is logged to LOG as "SECONDS-SINCE-START
STATUS", with the Retry-After of a 429 after them. The port is written to PORT_FILE once the
server listens. Signals change the service while it runs: SIGUSR1 halves the rate (another
client arrives); SIGUSR2 makes the next request answer 429 with "Retry-After: LONG_RETRY_AFTER"
(a single long pause).

usage: http_429_server.py PORT_FILE LOG RATE BURST RETRY_AFTER LONG_RETRY_AFTER
"""
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port_file, log_path = sys.argv[1], sys.argv[2]
rate, burst = float(sys.argv[3]), float(sys.argv[4])
retry_after, long_retry_after = sys.argv[5], sys.argv[6]

lock = threading.Lock()
start = time.monotonic()
tokens, refilled = burst, start
long_pause_next = False
log = open(log_path, "w", buffering=1)


def halve(*_):
    global rate
    with lock:
        rate /= 2


def arm_long_pause(*_):
    global long_pause_next
    with lock:
        long_pause_next = True


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        global tokens, refilled, long_pause_next
        with lock:
            now = time.monotonic()
            tokens = min(burst, tokens + (now - refilled) * rate)
            refilled = now
            if long_pause_next:
                long_pause_next = False
                status, wait = 429, long_retry_after
            elif tokens >= 1:
                tokens -= 1
                status, wait = 200, None
            else:
                status, wait = 429, retry_after
            log.write(f"{now - start:.6f} {status} {wait or ''}\n".rstrip() + "\n")
        self.send_response(status)
        if wait is not None:
            self.send_header("Retry-After", wait)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_):
        pass


signal.signal(signal.SIGUSR1, halve)
signal.signal(signal.SIGUSR2, arm_long_pause)
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".new", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".new", port_file)
server.serve_forever()
