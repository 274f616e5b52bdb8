"""Benchmark: what the Python layer adds to an exec round trip, and to streaming.

Usage:  python3 bench.py [--rounds 5] [--per-round 40] [--mib 64]

All figures come from one box (alpine:latest) in one run; the variants take
turns call by call, so drift (TCG, host load) hits every variant alike.

Baseline: the same box, the same library, the same command (`true`), with
nothing of this package in the way:
  * "C ABI, direct": boxlite_box_run called through cffi in a tight loop on
    this thread (no asyncio, no worker thread). cffi adds well under a
    microsecond per call, so this is the C ABI round trip, which is the Go
    core's Box.Run plus a cgo hop and a JSON decode of the command.
  * "C program": the same loop in a C program linked against libboxlite.so,
    attached to the same box by id (needs a C compiler and include/boxlite.h;
    skipped otherwise). It confirms the direct cffi loop is a C baseline.
Every other line is measured against "C ABI, direct" (p50 difference).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import boxlite
from boxlite import _ffi as raw

REPO = pathlib.Path(__file__).resolve().parents[2]
TRUE = json.dumps({"argv": ["true"]})

C_SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "boxlite.h"
int main(int argc, char **argv) {
  int n = atoi(argv[2]);
  boxlite_runtime_t *rt = NULL; boxlite_box_t *box = NULL; boxlite_error_t *err = NULL;
  if (boxlite_runtime_new(NULL, &rt, &err) || boxlite_box_get(rt, argv[1], &box, &err)) {
    fprintf(stderr, "%s\n", err ? err->message : "?"); return 1;
  }
  for (int i = 0; i < n; i++) {
    struct timespec a, b; boxlite_result_t *res = NULL;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (boxlite_box_run(box, "{\"argv\":[\"true\"]}", &res, &err)) { fprintf(stderr, "%s\n", err->message); return 1; }
    clock_gettime(CLOCK_MONOTONIC, &b);
    boxlite_result_free(res);
    printf("%lld\n", (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
  }
  boxlite_box_free(box); boxlite_runtime_free(rt);
  return 0;
}
"""


def build_c_baseline(tmp: str):
    cc = shutil.which("cc") or shutil.which("gcc")
    header = REPO / "include" / "boxlite.h"
    if not cc or not header.exists():
        return None, "no C compiler or include/boxlite.h"
    libdir = os.path.dirname(raw.library_path())
    src = os.path.join(tmp, "bench.c")
    exe = os.path.join(tmp, "bench-c")
    with open(src, "w") as f:
        f.write(C_SOURCE)
    p = subprocess.run([cc, "-O2", "-o", exe, src, f"-I{header.parent}", f"-L{libdir}", "-lboxlite",
                        f"-Wl,-rpath,{libdir}"], capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return exe, None


def c_round(exe: str, box_id: str, n: int):
    p = subprocess.run([exe, box_id, str(n)], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    return [int(x) / 1e9 for x in p.stdout.split()]


def fmt(samples):
    s = sorted(samples)
    q = lambda f: s[min(len(s) - 1, int(f * len(s)))]  # noqa: E731
    return q(0.5), q(0.9), q(0.99), statistics.fmean(s)


async def main(args):
    rt = boxlite.Boxlite.default()
    names = {i.name for i in await rt.images.list()}
    if not any(n.endswith("alpine:latest") for n in names):
        tar = REPO / "build" / "images" / "alpine.tar"
        print(f"loading {tar}")
        await rt.images.load(str(tar))
    t0 = time.perf_counter()
    async with boxlite.SimpleBox(image="alpine:latest", memory_mib=256) as sb:
        boot = time.perf_counter() - t0
        box = sb.box
        info = box.info()
        print(f"boxlite {boxlite.__version__}, libboxlite {raw.version()}, Python {sys.version.split()[0]}, "
              f"accel {info.accel}, box booted in {boot:.2f} s")
        h = box._h  # the raw handle, for the baseline only
        sync_box = boxlite.SyncBox(box)

        async def streaming():
            ex = await box.exec("true", stdin=False)
            await ex.stdout().read()
            await ex.wait()
            ex.close()

        async def raw_direct():
            raw.box_run(h, TRUE)  # on this thread: no asyncio, no worker thread

        async def sync_run():
            await asyncio.get_running_loop().run_in_executor(None, sync_box.run, "true")

        variants = {
            "C ABI, direct (baseline)": raw_direct,
            "Box.run (worker thread)": lambda: box.run("true"),
            "SimpleBox.exec (streaming)": lambda: sb.exec("true"),
            "Box.exec + read + wait": streaming,
            "sync API SyncBox.run": sync_run,
        }
        samples = {k: [] for k in variants}
        tmp = tempfile.mkdtemp(prefix="boxlite-bench-")
        exe, why = build_c_baseline(tmp)
        c_key = "C program (same box)"
        if exe:
            samples[c_key] = []
        for fn in variants.values():  # warm up
            for _ in range(3):
                await fn()
        for _ in range(args.rounds):
            # round robin, call by call, so noise hits every variant alike
            for _ in range(args.per_round):
                for k, fn in variants.items():
                    t = time.perf_counter()
                    await fn()
                    samples[k].append(time.perf_counter() - t)
            if exe:  # a separate process: in blocks between rounds
                samples[c_key] += await asyncio.get_running_loop().run_in_executor(None, c_round, exe, box.id,
                                                                                   args.per_round)
        shutil.rmtree(tmp, ignore_errors=True)

        print(f"\nexec round trip of `true`, {args.rounds} rounds x {args.per_round}, interleaved:")
        base = fmt(samples["C ABI, direct (baseline)"])[0]
        print(f"  {'variant':32s} {'p50':>9s} {'p90':>9s} {'p99':>9s} {'mean':>9s}  {'p50 over baseline':>18s}")
        for k, s in samples.items():
            p50, p90, p99, mean = fmt(s)
            print(f"  {k:32s} {p50*1e3:7.2f}ms {p90*1e3:7.2f}ms {p99*1e3:7.2f}ms {mean*1e3:7.2f}ms  "
                  f"{(p50-base)*1e6:+11.0f} us ({(p50/base-1)*100:+.0f}%)")
        if not exe:
            print(f"  (C program baseline skipped: {why})")

        # Streaming throughput: stdout of dd, raw blocking reads vs the
        # asyncio reader. The guest side is the same for both.
        mib = args.mib
        cmd = json.dumps({"argv": ["dd", "if=/dev/zero", "bs=65536", f"count={mib * 16}"]})

        def raw_stream():
            ex = raw.box_exec(h, cmd)
            buf = raw.new_buffer(1 << 16)
            total = 0
            t = time.perf_counter()
            while True:
                rc, n = raw.execution_read(ex, raw.STDOUT, buf, -1)
                if rc == raw.EOF:
                    break
                total += n
            dt = time.perf_counter() - t
            raw.execution_wait(ex, -1)
            ex.close()
            assert total == mib << 20, total
            return dt

        async def py_stream():
            t = time.perf_counter()
            ex = await box.exec("dd", "if=/dev/zero", "bs=65536", f"count={mib * 16}", stdin=False)
            total = 0
            async for chunk in ex.stdout().iter_bytes():
                total += len(chunk)
            dt = time.perf_counter() - t
            await ex.wait()
            ex.close()
            assert total == mib << 20, total
            return dt

        raw_t, py_t = [], []
        for _ in range(3):
            raw_t.append(await asyncio.get_running_loop().run_in_executor(None, raw_stream))
            py_t.append(await py_stream())
        print(f"\nstdout throughput, {mib} MiB from dd (best of 3):")
        print(f"  C ABI blocking reads (baseline)  {mib / min(raw_t):8.1f} MiB/s")
        print(f"  Execution.stdout().iter_bytes()  {mib / min(py_t):8.1f} MiB/s  ({(min(raw_t)/min(py_t)-1)*100:+.0f}%)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--per-round", type=int, default=40)
    ap.add_argument("--mib", type=int, default=64)
    asyncio.run(main(ap.parse_args()))
