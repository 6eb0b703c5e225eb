"""Kernel time of Python callables, read from CUPTI through torch.profiler.

Each call is preceded by an L2 flush (a 256 MB write); a session opens with
two more and ends with one. The device activities (kernels, memsets, copies) of a profiled
session are sorted by start time and cut into calls at the flush's
activities; a call's kernel time is the device time its activities cover (the
union of their intervals). Launch costs, host work between launches and gaps
between a call's kernels do not count.

The flush's activities are learned once, by profiling flushes alone. Calls are
delimited by those names and checked: every run of flush activities must have
the learned length and the number of calls must be the number made, so a
callable that launches something named like the flush, or activity records
that go missing, raise TimingError instead of giving a wrong figure.
"""
import collections
import statistics

import torch
from torch.profiler import ProfilerActivity, profile

FLUSH_BYTES = 256 << 20  # over 4x the 50-60 MB L2 of an H100/H200, as triton's do_bench
LEAD_IN = 2  # extra flushes that open a session

Activity = collections.namedtuple("Activity", "start end name")  # us, from the profiler's clock
# kernel_us: device time covered by the call's activities; span_us: first start to last end;
# lead_us: the flush's end to the call's first start (launch latency or host lag, not counted);
# event_us: CUDA-event time around the call (when asked for); names: the call's activities.
Call = collections.namedtuple("Call", "kernel_us span_us lead_us event_us names")


class TimingError(RuntimeError):
    pass


def covered(acts):
    """Length of the union of the activities' intervals."""
    total, end = 0.0, None
    for a in sorted(acts):
        if end is None or a.start >= end:
            total += a.end - a.start
            end = a.end
        elif a.end > end:
            total += a.end - end
            end = a.end
    return total


def split_calls(acts, flush_names, per_flush, n_calls, lead_in=0):
    """Cut a stream of activities [lead_in + 1 flushes, call, flush, call, ...,
    flush] into n_calls calls: a list of (lead_us, [activities]). Raises
    TimingError when it does not fit. The lead-in flushes keep a record lost
    at the session's start (if CUPTI ever did that) from being the first call's;
    of those, any number up to all are accepted."""
    out, i, n = [], 0, len(acts)
    for k in range(n_calls + 1):
        run, flush_end = 0, None
        while i < n and acts[i].name in flush_names:
            flush_end = acts[i].end
            i, run = i + 1, run + 1
        if not (1 <= run <= (1 + lead_in) * per_flush if k == 0 and lead_in else run == per_flush):
            where = f"before call {k} of {n_calls}" if k < n_calls else "after the last call"
            want = f"1 to {(1 + lead_in) * per_flush}" if k == 0 and lead_in else per_flush
            raise TimingError(f"{run} flush activities {where}, expected {want} "
                              "(does a callable launch a kernel named like the flush, or were records lost?)")
        if k == n_calls:
            break
        seg = []
        while i < n and acts[i].name not in flush_names:
            seg.append(acts[i])
            i += 1
        if not seg:
            raise TimingError(f"call {k} of {n_calls}: no device activity recorded")
        out.append((seg[0].start - flush_end, seg))
    if i != n:
        raise TimingError(f"{n - i} device activities after the closing flush (first: {acts[i].name[:80]})")
    return out


def device_activities(prof):
    acts = [Activity(e.time_range.start, e.time_range.end, e.name) for e in prof.events()
            if e.device_type.name == "CUDA"]
    acts.sort()
    return acts


class KernelTimer:
    def __init__(self, flush_bytes=FLUSH_BYTES, learn=8):
        self.cache = torch.empty(flush_bytes // 2, dtype=torch.int16, device="cuda")
        for _ in range(3):
            self.flush()
        for _ in range(3):  # the first session also pays CUPTI's start-up
            acts = self._record(lambda: [self.flush() for _ in range(learn)])
            if acts and len(acts) % learn == 0:
                break
        else:
            raise TimingError(f"{learn} flushes gave {len(acts)} device activities")
        self.per_flush = len(acts) // learn
        self.flush_names = frozenset(a.name for a in acts)
        self.flush_us = statistics.median(covered(acts[j * self.per_flush:(j + 1) * self.per_flush])
                                          for j in range(learn))

    def flush(self):
        self.cache.zero_()

    def _record(self, body):
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            body()
            torch.cuda.synchronize()
        return device_activities(prof)

    def run(self, fns, calls, events=False):
        """In one profiled session: LEAD_IN flushes, `calls` iterations of
        [flush, fns[0], flush, fns[1], ...], a closing flush. Returns one list
        of Call per function. With events, CUDA events are recorded around
        every call too (event_us)."""
        evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
               for _ in range(calls * len(fns))] if events else None

        def body():
            for _ in range(LEAD_IN):
                self.flush()
            k = 0
            for _ in range(calls):
                for fn in fns:
                    self.flush()
                    if evs:
                        evs[k][0].record()
                        fn()
                        evs[k][1].record()
                    else:
                        fn()
                    k += 1
            self.flush()  # closes the last call

        segs = split_calls(self._record(body), self.flush_names, self.per_flush, calls * len(fns), LEAD_IN)
        out = [[] for _ in fns]
        for k, (lead, seg) in enumerate(segs):
            ev = evs[k][0].elapsed_time(evs[k][1]) * 1e3 if evs else None
            out[k % len(fns)].append(Call(covered(seg), max(a.end for a in seg) - seg[0].start, lead, ev,
                                          tuple(a.name for a in seg)))
        return out
