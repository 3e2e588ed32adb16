"""The subprocess side of ``memory.rss_peak_delta_subprocess``: ``python -m learning.benchmark.memory_probe SPEC``
builds one IK case (``ik_suite.probe_case``) in this fresh interpreter, warms it up, runs it once and prints the
growth of its peak resident set as JSON."""

from __future__ import annotations

import json
import resource
import sys

from learning.benchmark.ik_suite import probe_case


def main(spec: dict) -> None:
    warm, run = probe_case(spec)
    warm()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    unit = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux.
    print(json.dumps({"rss_peak_delta_bytes": (after - before) * unit}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
