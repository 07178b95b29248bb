"""Helpers of the quota tests: a reader that notes when each read arrives, and the busiest window.

  quota_windows.py read OUT LOG UNITS CMD...   runs CMD once ready to read, copies its output to
                                    OUT and appends "<ns> <units>" per read to LOG; UNITS is
                                    "bytes" or "lines" (the newlines read)
  quota_windows.py busiest WINDOW_S LOG...   prints the most units of any window of WINDOW_S
                                    seconds over the "<ns> <units>" lines of the logs
  quota_windows.py within WINDOW_S LOG...    the same over "<from_ns> <to_ns> <units>" lines (a
                                    grant known to lie between two moments): prints the most
                                    units certainly inside one window, those that may be in one,
                                    and the median of to - from in ms
"""
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


def within(window_s, log_paths):
    spans = []
    for path in log_paths:
        with open(path) as log:
            spans += [tuple(map(int, line.split())) for line in log if line.strip()]
    window_ns = int(float(window_s) * 1e9)
    # The windows worth trying start where a grant may start: any other window holds no more.
    starts = sorted(span[0] for span in spans)
    by_end = sorted(spans, key=lambda span: span[1])
    certain = possible = 0
    for start in starts:
        end = start + window_ns
        certain = max(certain, sum(u for f, t, u in spans if f >= start and t <= end))
        possible = max(possible, sum(u for f, t, u in by_end if t >= start and f <= end))
    widths = sorted(t - f for f, t, _ in spans)
    print(certain, possible, f"{widths[len(widths) // 2] / 1e6:.3f}")


if __name__ == "__main__":
    if sys.argv[1] == "read":
        read(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    elif sys.argv[1] == "within":
        within(sys.argv[2], sys.argv[3:])
    else:
        busiest(sys.argv[2], sys.argv[3:])
