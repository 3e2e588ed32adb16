"""``python -m app [--host HOST] [--port PORT]``: serve the viewer until Ctrl-C."""

from __future__ import annotations

from app.config import ViewerConfig
from app.viewer import launch


def main() -> None:
    viewer = launch(ViewerConfig.from_argv())
    try:
        print(f"Viewer running at {viewer.url} (Ctrl-C to stop)", flush=True)
        viewer.server.sleep_forever()
    except KeyboardInterrupt:
        viewer.server.stop()


if __name__ == "__main__":
    main()
