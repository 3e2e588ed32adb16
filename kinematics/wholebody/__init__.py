"""The whole-body layer: tasks and constraints on a ``KinematicTree``, a strict cascade of QPs per step, and
``WholeBodyIKLayer`` (in the shape mink and pink made familiar: a configuration, tasks, limits, one solve)."""

from kinematics.wholebody.cascade import CascadeStep, cascade_step
from kinematics.wholebody.com_task import ComTask
from kinematics.wholebody.constraint import Constraint
from kinematics.wholebody.contact import Contact
from kinematics.wholebody.frame_task import FrameTask
from kinematics.wholebody.layer import WholeBodyIKCfg, WholeBodyIKLayer, WholeBodyIKResult
from kinematics.wholebody.limits import ConfigurationLimit, StepLimit
from kinematics.wholebody.posture_task import PostureTask
from kinematics.wholebody.relative_frame_task import RelativeFrameTask
from kinematics.wholebody.standing import StandingProblem, standing_configuration, standing_problem
from kinematics.wholebody.support_polygon import ComInSupportPolygon
from kinematics.wholebody.task import Task

__all__ = [
    "CascadeStep",
    "ComInSupportPolygon",
    "ComTask",
    "ConfigurationLimit",
    "Constraint",
    "Contact",
    "FrameTask",
    "PostureTask",
    "RelativeFrameTask",
    "StandingProblem",
    "StepLimit",
    "Task",
    "WholeBodyIKCfg",
    "WholeBodyIKLayer",
    "WholeBodyIKResult",
    "cascade_step",
    "standing_configuration",
    "standing_problem",
]
