"""The Unitree G1 humanoid (example-robot-data's ``g1_description``, BSD-3-Clause): 29 revolute joints, no mimic
joints, 33.3 kg, a floating pelvis.

Each ankle-roll link carries four 5 mm collision spheres at its sole's corners (centres at z = -0.03 in the ankle
frame); the sole corners here are those spheres' lowest points, so the feet stand on the ground plane they touch.
The reference posture stands with the knees slightly bent (hip pitch + knee + ankle pitch = 0 keeps the soles
flat) and the elbows bent, arms clear of the torso.
"""

from __future__ import annotations

from assets.description import RobotDescription, SoleContact

_LEGS = ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
_ARMS = ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw")
_SOLE_CORNERS = ((-0.05, 0.025, -0.035), (-0.05, -0.025, -0.035), (0.12, 0.03, -0.035), (0.12, -0.03, -0.035))

_POSTURE = {
    "left_hip_pitch_joint": -0.1, "left_knee_joint": 0.3, "left_ankle_pitch_joint": -0.2,
    "right_hip_pitch_joint": -0.1, "right_knee_joint": 0.3, "right_ankle_pitch_joint": -0.2,
    "left_shoulder_pitch_joint": 0.2, "left_shoulder_roll_joint": 0.2, "left_elbow_joint": 0.9,
    "right_shoulder_pitch_joint": 0.2, "right_shoulder_roll_joint": -0.2, "right_elbow_joint": 0.9,
}  # fmt: skip
_JOINTS = (
    *(f"left_{j}_joint" for j in _LEGS),
    *(f"right_{j}_joint" for j in _LEGS),
    "waist_yaw_joint",
    "waist_roll_joint",
    "waist_pitch_joint",
    *(f"left_{j}_joint" for j in _ARMS),
    *(f"right_{j}_joint" for j in _ARMS),
)

G1 = RobotDescription(
    name="g1",
    urdf_file="example-robot-data/robots/g1_description/urdf/g1_29dof_rev_1_0.urdf",
    license="BSD-3-Clause",
    root_link="pelvis",
    floating_base=True,
    joints=_JOINTS,  # the URDF's depth-first order, as Pinocchio numbers them
    reference_posture=tuple(_POSTURE.get(name, 0.0) for name in _JOINTS),
    frames={
        "pelvis": "pelvis",
        "torso": "torso_link",
        "left_hand": "left_rubber_hand",
        "right_hand": "right_rubber_hand",
        "right_shoulder": "right_shoulder_pitch_link",
        "left_foot": "left_ankle_roll_link",
        "right_foot": "right_ankle_roll_link",
    },
    contacts={
        "left_foot": SoleContact("left_ankle_roll_link", _SOLE_CORNERS),
        "right_foot": SoleContact("right_ankle_roll_link", _SOLE_CORNERS),
    },
    standing_base_height=0.78420,  # the pelvis above the ground in the reference posture (checked by the tests)
)
