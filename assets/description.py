"""What the project knows of a robot, as data: its URDF, the joints it drives, named frames, a reference posture,
contacts, and what the viewer needs to draw it. Nothing here computes kinematics (assets imports no other package
of the project); the numbers that come from kinematics (a standing base height) are checked by the tests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from assets.example_robot_data import robot_file


@dataclass(frozen=True)
class SoleContact:
    """A foot that can stand on the ground: its link and the corners of its sole in that link's frame (metres);
    their ground projections span the foot's support polygon."""

    link: str
    corners: tuple[tuple[float, float, float], ...]


@dataclass(frozen=True)
class RobotDescription:
    """One robot the project uses.

    Attributes:
        name: short name (``"panda"``, ``"g1"``), as ``--robot`` spells it.
        urdf_file: the URDF's path under example-robot-data's ``share`` folder.
        license: of the description (URDF and meshes).
        root_link: the URDF's root link.
        floating_base: whether the robot moves freely in the world (a humanoid) or is bolted down (an arm).
        joints: the joints the project drives, in the order it stores them.
        reference_posture: radians (or metres), one per ``joints`` entry.
        frames: named frames the project uses, role -> link (e.g. ``"tcp"``, ``"left_hand"``).
        held_joints: joints the project does not drive, held at these values when drawn (the Panda's fingers).
        contacts: the feet, by role (``"left_foot"``), with their sole corners.
        standing_base_height: metres of the base above flat ground in the reference posture, feet flat on it.
        ghost_meshes: which of the URDF's mesh sets the viewer's translucent ghosts draw (``"collision"`` when
            it holds light meshes, else ``"visual"``).
    """

    name: str
    urdf_file: str
    license: str
    root_link: str
    floating_base: bool
    joints: tuple[str, ...]
    reference_posture: tuple[float, ...]
    frames: Mapping[str, str]
    held_joints: Mapping[str, float] = field(default_factory=dict)
    contacts: Mapping[str, SoleContact] = field(default_factory=dict)
    standing_base_height: float | None = None
    ghost_meshes: str = "visual"

    def __post_init__(self) -> None:
        if len(self.reference_posture) != len(self.joints):
            raise ValueError(f"{self.name}: {len(self.reference_posture)} posture values for {len(self.joints)} joints")
        if self.ghost_meshes not in ("visual", "collision"):
            raise ValueError(f"{self.name}: ghost_meshes must be 'visual' or 'collision', not {self.ghost_meshes!r}")
        for name in ("frames", "held_joints", "contacts"):  # frozen all the way down
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def urdf_path(self) -> Path:
        return robot_file(self.urdf_file)

    def urdf_text(self) -> str:
        return self.urdf_path().read_text()

    @property
    def posture(self) -> dict[str, float]:
        """The reference posture by joint name."""
        return dict(zip(self.joints, self.reference_posture, strict=True))
