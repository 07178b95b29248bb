"""Helpers of the quota tests: a reader that notes when each read arrives, and the busiest window.

  quota_windows.py read OUT LOG UNITS CMD...   runs CMD once ready to read, copies its output to
                                    OUT and appends "<ns> <units>" per read to LOG; UNITS is
                                    "bytes" or "lines" (the newlines read)
  quota_windows.py busiest WINDOW_S LOG...   prints the most units of any window of WINDOW_S
                                    seconds over the "<ns> <units>" lines of the logs
  quota_windows.py within WINDOW_S LOG...    the same over "<from_ns> <to_ns> <units>" lines (a
                                    grant known to lie between two moments): prints the most
                                    units certainly inside one window, those that may be in one,
                                    and the median of to - from in ms; --show: also the
                                    grants certainly in the busiest window (to stderr);
                                    --wall CLOCKS: the windows on the wall clock (below)
  quota_windows.py clocks CLOCKS    until SIGTERM or its parent ends, appends every 50 ms how
                                    far the wall clock is from the monotonic one
                                    ("<monotonic_ns> <distance_ns>")
  quota_windows.py moved CLOCKS     how far that distance moved over the log, in ms

A store that decides on a wall clock (Redis's TIME) keeps its windows on that clock. The grants'
moments are noted on the monotonic clock, which a step of the wall clock (NTP, a virtual
machine's resync) does not move: --wall places them on the wall clock, each widened by the
distance before and after it where a step lies between two readings.
"""
import bisect
import os
import signal
import subprocess
import sys
import time


def read(out_path, log_path, units, command):
    # Started by the reader, so that no read waits for the reader to start.
    process = subprocess.Popen(command, stdout=subprocess.PIPE)
    with open(out_path, "wb") as out, open(log_path, "w") as log:
        while True:
            data = process.stdout.read1(1 << 16)
            if not data:
                break
            count = data.count(b"\n") if units == "lines" else len(data)
            log.write(f"{time.monotonic_ns()} {count}\n")
            out.write(data)
    sys.exit(process.wait())


def busiest(window_s, log_paths):
    events = []
    for path in log_paths:
        with open(path) as log:
            events += [tuple(map(int, line.split())) for line in log if line.strip()]
    events.sort()
    window_ns = int(float(window_s) * 1e9)
    most = held = first = 0
    for at, units in events:
        held += units
        while events[first][0] <= at - window_ns:
            held -= events[first][1]
            first += 1
        most = max(most, held)
    print(most)


def read_clocks(clocks_path):
    with open(clocks_path) as log:
        return [tuple(map(int, line.split())) for line in log if line.strip()]


def on_wall_clock(spans, readings):
    """Each span moved by the distance of the clocks at its ends: the smaller of the readings
    around its start, the larger of those around its end."""
    moments = [at for at, _ in readings]

    def around(t):
        i = bisect.bisect_left(moments, t)
        return [readings[j][1] for j in (i - 1, i) if 0 <= j < len(readings)]

    return [(f + min(around(f)), t + max(around(t)), u, process) for f, t, u, process in spans]


def within(window_s, log_paths, show, clocks_path):
    spans = []
    for process, path in enumerate(log_paths, 1):
        with open(path) as log:
            spans += [(*map(int, line.split()), process) for line in log if line.strip()]
    if clocks_path:
        spans = on_wall_clock(spans, read_clocks(clocks_path))
    window_ns = int(float(window_s) * 1e9)
    # The windows worth trying start where a grant may start: any other window holds no more.
    starts = sorted(span[0] for span in spans)
    certain = possible = 0
    busiest = starts[0] if starts else 0
    for start in starts:
        end = start + window_ns
        held = sum(u for f, t, u, _ in spans if f >= start and t <= end)
        if held > certain:
            certain, busiest = held, start
        possible = max(possible, sum(u for f, t, u, _ in spans if t >= start and f <= end))
    widths = sorted(t - f for f, t, _, _ in spans)
    print(certain, possible, f"{widths[len(widths) // 2] / 1e6:.3f}")
    if show:
        print("the grants certainly in the busiest window, in ms after its start:", file=sys.stderr)
        for f, t, u, process in sorted(spans):
            if f >= busiest and t <= busiest + window_ns:
                print(f"  {(f - busiest) / 1e6:9.3f} to {(t - busiest) / 1e6:9.3f}: {u} "
                      f"(process {process})", file=sys.stderr)


def clocks(log_path):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # Also ends with the test that started it, should the test end without a SIGTERM.
    parent = os.getppid()
    with open(log_path, "w", buffering=1) as log:
        while os.getppid() == parent:
            # The closest of a few readings: a reading interrupted between the clocks is off.
            closest = None
            for _ in range(5):
                before = time.monotonic_ns()
                wall = time.time_ns()
                after = time.monotonic_ns()
                if closest is None or after - before < closest[0]:
                    closest = (after - before, wall - (before + after) // 2)
            log.write(f"{time.monotonic_ns()} {closest[1]}\n")
            time.sleep(0.05)


def moved(clocks_path):
    distances = [distance for _, distance in read_clocks(clocks_path)]
    print(f"{(max(distances) - min(distances)) / 1e6:.3f}" if distances else "0.000")


if __name__ == "__main__":
    if sys.argv[1] == "read":
        read(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    elif sys.argv[1] == "within":
        arguments, show, clocks_path = sys.argv[2:], False, None
        while arguments[0].startswith("--"):
            if arguments[0] == "--show":
                show, arguments = True, arguments[1:]
            else:
                clocks_path, arguments = arguments[1], arguments[2:]
        within(arguments[0], arguments[1:], show, clocks_path)
    elif sys.argv[1] == "clocks":
        clocks(sys.argv[2])
    elif sys.argv[1] == "moved":
        moved(sys.argv[2])
    else:
        busiest(sys.argv[2], sys.argv[3:])
