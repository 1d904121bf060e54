"""The CUDA runtime's total memory moves by some MiB between machines (driver, CUDA and torch versions): a fit
problem's answers at both ends of the range of the captures found (shared by I.1.A04, I.1.A05 and III.2.A03)."""

from numbook.check import sanity, value


def driver_range(answers, used_mib, low_mib, high_mib, here, sentence, **claim):
    """Record how far the lowest and the highest CUDA totals found lie from the one used (``driver_below_mib``,
    ``driver_above_mib``, in MiB) and assert ``driver_range_same``: ``answers(mib)`` is the same at both ends, and
    equal to ``here`` (the answers at the total used) whenever that total lies in the range.

    Each answer changes one way only as the capacity grows (a count of what fits, whether something fits), so
    equal answers at both ends mean no flip in between. A perturbed total may lie outside the range: then only
    the ends must agree. ``sentence`` and ``claim`` (``relation=...``) go to the sanity. Returns the two ends.
    """
    value("driver_below_mib", used_mib - low_mib, unit="MiB")
    value("driver_above_mib", high_mib - used_mib, unit="MiB")
    ends = [answers(mib) for mib in (low_mib, high_mib)]
    sanity("driver_range_same", ends[0] == ends[1] and (ends[0] == here or not low_mib <= used_mib <= high_mib),
           sentence, operands=(ends, here), **claim)
    return ends
