"""Prints p50/p99/max latency from an h2load --log-file (start, status, microseconds)."""
import sys

times = []
with open(sys.argv[1]) as f:
    for line in f:
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "200":
            times.append(int(parts[2]))
times.sort()
if not times:
    print("no successful requests logged")
    sys.exit(1)
pick = lambda q: times[min(len(times) - 1, int(q * len(times)))]
print(f"latency {sys.argv[2]}: p50 {pick(0.50) / 1000:.3f} ms, p99 {pick(0.99) / 1000:.3f} ms, max {times[-1] / 1000:.3f} ms ({len(times)} requests)")
