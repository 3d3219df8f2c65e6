"""Work over a fleet's records without the cyclic garbage collector.

Reading 100,000 result lines makes millions of small objects, none in a cycle; the collector
walks all of them again and again as they pile up (on a 2-core runner that was 60% of reading
a record). The batch commands (plan, merge, report, history, baseline) and the report a run
writes at its end pause it; reference counting still frees everything as usual.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
