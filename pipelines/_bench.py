"""What the benchmarks share."""

import resource

__all__ = ["peak_rss_bytes"]


def peak_rss_bytes():
    """Peak resident set size of this process so far, in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
