"""The whole-body layer's tasks: what a level of the cascade minimises."""

from kinematics.wholebody.tasks.com import ComTask
from kinematics.wholebody.tasks.frame import FrameTask
from kinematics.wholebody.tasks.posture import PostureTask
from kinematics.wholebody.tasks.relative_frame import RelativeFrameTask
from kinematics.wholebody.tasks.task import Task

__all__ = [
    "ComTask",
    "FrameTask",
    "PostureTask",
    "RelativeFrameTask",
    "Task",
]
