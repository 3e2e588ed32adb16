"""``python -m app [--host HOST] [--port PORT] [--checkpoint PATH] [--device DEV] [--preset NAME]``: serve the viewer."""

from __future__ import annotations

import sys

import learning.threads  # noqa: F401  (first: passive OpenMP waiting, before torch is imported)
from app.config import ViewerConfig
from app.viewer import launch
from kinematics.errors import ProjectError


def main() -> int:
    config = ViewerConfig.from_argv()
    try:
        viewer = launch(config)
    except (ProjectError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"Viewer running at {viewer.url} (Ctrl-C to stop)", flush=True)
    try:
        viewer.server.sleep_forever()
    except KeyboardInterrupt:
        viewer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
