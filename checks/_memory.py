"""Peak memory of a call, measured with torch's profiler (shared by I.4.B06 and I.4.B08)."""

from torch.profiler import ProfilerActivity, profile


def peak_alloc(fn):
    """Run fn under the profiler; return (result, peak bytes allocated during the call).

    The peak is the running maximum of the allocation/free events the profiler records for
    torch's CPU allocator, in time order, counted from zero at the start of the call. The events
    are read through the profiler's kineto results, which are not a public torch API.
    """
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn()
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    cur = peak = 0
    for e in events:
        cur += e.nbytes()
        peak = max(peak, cur)
    return out, peak
