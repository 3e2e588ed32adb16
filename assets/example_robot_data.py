"""Files of the PyPI package ``example-robot-data``: where its ``share`` folder is, and ``package://`` mesh URIs.

The package has no importable module; its files lie under the distribution's ``cmeel.prefix/share``. URDFs there
reference meshes as ``package://example-robot-data/robots/<robot>/meshes/...``, which ``resolve_package_uri`` maps
to files (yourdfpy's ``filename_handler``, so viser and trimesh load the real meshes).

``EXAMPLE_ROBOT_DATA_SHARE`` names another ``share`` folder holding ``example-robot-data/robots`` instead (read once,
at the first lookup): a conda or robotpkg install, or a copy of only the files a run reads (a machine without the
package, which is over 400 MB installed).
"""

from __future__ import annotations

import importlib.metadata
import os
from functools import lru_cache
from pathlib import Path

from assets.errors import MissingAssetError

DISTRIBUTION = "example-robot-data"
ROBOTS = "example-robot-data/robots"  # under ``share``
SHARE_VARIABLE = "EXAMPLE_ROBOT_DATA_SHARE"


@lru_cache(maxsize=1)
def share_dir() -> Path:
    """The ``share`` folder that holds ``example-robot-data/robots``: ``$EXAMPLE_ROBOT_DATA_SHARE`` where it is set,
    else the installed distribution's."""
    if named := os.environ.get(SHARE_VARIABLE):
        share = Path(named).resolve()
        if not (share / ROBOTS).is_dir():
            raise MissingAssetError(f"${SHARE_VARIABLE} is {named!r}, which holds no {ROBOTS} folder")
        return share
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise MissingAssetError(
            f"the robot descriptions come from the PyPI package {DISTRIBUTION!r}; install it with "
            f"`pip install {DISTRIBUTION}`"
        ) from exc
    share = Path(str(dist.locate_file("cmeel.prefix/share")))
    if not (share / ROBOTS).is_dir():
        raise MissingAssetError(f"{DISTRIBUTION} is installed but {share / ROBOTS} is missing; reinstall it")
    return share


def robot_file(relative: str) -> Path:
    """A file of ``example-robot-data`` by its path under ``share`` (e.g. ``example-robot-data/robots/...``)."""
    path = share_dir() / relative
    if not path.is_file():
        raise MissingAssetError(f"{path} is not installed; reinstall {DISTRIBUTION}")
    return path


def resolve_package_uri(uri: str) -> str:
    """Map ``package://example-robot-data/...`` (or a plain path relative to ``share``) to an absolute file path."""
    relative = uri.removeprefix("package://")
    candidate = share_dir() / relative
    if candidate.is_file():
        return str(candidate)
    raise MissingAssetError(f"mesh {uri!r} not found under {share_dir()}")
