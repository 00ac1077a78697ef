"""The Python client's cost over the C++ client's, as ratios measured in one run on one
daemon: the unary empty-kernel launch rate, and 64 MiB writes and reads, inline and
through shared memory. The C++ figures are `gpucmdctl bench --json` (client/ctl_bench.cc);
the Python ones repeat its loops: launches for `--seconds` then one synchronize; writes
each followed by a synchronize; reads. The Python shared-memory figures include copying
the numpy array into (or out of) the region, as every `set`/`get` does. Then small
transfers from Python, each a median of single calls, over the C++ client's round trip
(its idle Synchronize's median): a 4 KiB write, a 4 KiB read, and a batch of a 4 KiB
write, a launch and a 4 KiB read. And a batch that writes 32 MiB and reads them back
against the same `set` and `get` through shared memory (medians of alternating rounds).

    bazel run -c opt //tests/bench:python_client_bench -- --seconds=2
"""

import argparse
import json
import os
import statistics
import subprocess
import time

import numpy

import gpucmd
from conftest import Daemon

SIZE = 64 << 20
EMPTY = r'extern "C" __global__ void empty(int n) {}'
SMALL = 4096
BATCH_SIZE = 32 << 20


def rate(seconds, round_, finish=lambda: None):
    """Items per second: `round_` (returning its items) repeated for `seconds`, then
    `finish`, all timed."""
    start = time.monotonic()
    items = 0.0
    while True:
        items += round_()
        if time.monotonic() - start >= seconds:
            break
    finish()
    return items / (time.monotonic() - start)


def python_figures(target, seconds):
    figures = {}
    with gpucmd.connect(target) as client, client.session(name="python-bench") as session:
        empty = session.compile(EMPTY, "empty")

        def launch():
            try:
                empty(1, 1, (0,))
                return 1
            except gpucmd.ResourceExhausted:  # backpressure: wait for the queued ones
                session.synchronize()
                return 0
        figures["launch"] = rate(seconds, launch, session.synchronize)
        gigabytes = SIZE / 1e9
        data = numpy.full(SIZE, ord("w"), numpy.uint8)
        array = session.empty(SIZE, numpy.uint8)
        for name, shared in (("inline", False), ("shared memory", True)):
            def write():
                array.set(data, shared_memory=shared)
                session.synchronize()
                return gigabytes
            figures[f"{name} write"] = rate(seconds, write)
            figures[f"{name} read"] = rate(
                seconds, lambda: array.get(shared_memory=shared).nbytes / 1e9)
        figures.update(batch_figures(session, seconds))
        small = session.empty(SMALL, numpy.uint8)
        small_data = numpy.full(SMALL, ord("s"), numpy.uint8)

        def batch():
            with session.batch() as each:
                each.write(small, small_data)
                each.launch(empty, 1, 1, (0,))
                read = each.read(small)
            return read.get()
        for name, transfer in (("4 KiB write", lambda: small.set(small_data)),
                               ("4 KiB read", small.get), ("4 KiB batch", batch)):
            figures[name] = median_microseconds(seconds, transfer)
    return figures


def batch_figures(session, seconds):
    """A batch that writes BATCH_SIZE bytes and reads them back (through the session's
    shared-memory region) against the same two transfers as unary `set` and `get`
    through it, alternating in rounds: GB/s of both directions each."""
    data = numpy.full(BATCH_SIZE, ord("b"), numpy.uint8)
    array = session.empty(BATCH_SIZE, numpy.uint8)
    gigabytes = 2 * BATCH_SIZE / 1e9

    def batched():
        with session.batch() as each:
            each.write(array, data)
            read = each.read(array)
        read.get()
        return gigabytes

    def unary():
        array.set(data, shared_memory=True)
        array.get(shared_memory=True)
        return gigabytes
    rounds = {"batch": [], "unary": []}
    for _ in range(5):
        rounds["unary"].append(rate(seconds / 10, unary))
        rounds["batch"].append(rate(seconds / 10, batched))
    return {f"{BATCH_SIZE >> 20} MiB batch {name}": statistics.median(rates)
            for name, rates in rounds.items()}


def median_microseconds(seconds, call):
    """The median time of `call`, made again and again for `seconds`, in microseconds."""
    times = []
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        began = time.perf_counter()
        call()
        times.append((time.perf_counter() - began) * 1e6)
    return statistics.median(times)


def cpp_figures(target, seconds):
    # This file is tests/bench/python_client_bench.py of the workspace in the runfiles.
    workspace = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    output = subprocess.check_output([
        os.path.join(workspace, "client", "gpucmdctl"), f"--target={target}", "--json",
        "bench", f"--bench_bytes={SIZE}", f"--bench_seconds={seconds}"])
    rows = {row["what"]: row["value"] for row in json.loads(output)}
    pick = lambda prefix: next(value for what, value in rows.items() if what.startswith(prefix))
    return {"launch": pick("empty launches + Synchronize, unary"),
            "inline write": pick("inline write"), "inline read": pick("inline read"),
            "shared memory write": pick("shared-memory write"),
            "shared memory read": pick("shared-memory read"),
            "round trip": pick("idle Synchronize")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    options = parser.parse_args()
    daemon = Daemon()
    try:
        cpp = cpp_figures(daemon.target, options.seconds)
        python = python_figures(daemon.target, options.seconds)
    finally:
        daemon.stop()
    units = {"launch": "launches/s"}
    print(f"{'figure':<28} {'Python':>12} {'C++':>12} {'Python/C++':>11}")
    for name in cpp:
        if name == "round trip":
            continue
        unit = units.get(name, "GB/s")
        print(f"{name + ' (' + unit + ')':<28} {python[name]:>12.4g} {cpp[name]:>12.4g} "
              f"{python[name] / cpp[name]:>11.2f}")
    batch, unary = (python[f"{BATCH_SIZE >> 20} MiB batch {name}"] for name in ("batch", "unary"))
    print(f"{'write + read in one batch':<28} {'batch GB/s':>12} {'set+get GB/s':>12} "
          f"{'x_unary':>11}")
    print(f"{str(BATCH_SIZE >> 20) + ' MiB each way':<28} {batch:>12.4g} {unary:>12.4g} "
          f"{batch / unary:>11.2f}")
    round_trip = cpp["round trip"]
    print(f"{'small transfer (us)':<28} {'Python':>12} {'C++ trip':>12} {'x_round_trip':>12}")
    for name in ("4 KiB write", "4 KiB read", "4 KiB batch"):
        print(f"{name:<28} {python[name]:>12.4g} {round_trip:>12.4g} "
              f"{python[name] / round_trip:>12.2f}")


if __name__ == "__main__":
    main()
