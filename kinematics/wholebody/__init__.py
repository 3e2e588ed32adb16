"""The whole-body layer: tasks and constraints on a ``KinematicTree``, a strict cascade of QPs per step, and
``WholeBodyIKLayer`` (in the shape mink and pink made familiar: a configuration, tasks, limits, one solve)."""

from kinematics.wholebody.cascade import CascadeStep, cascade_step
from kinematics.wholebody.constraints import ComInSupportPolygon, ConfigurationLimit, Constraint, Contact, StepLimit
from kinematics.wholebody.layer import WholeBodyIKCfg, WholeBodyIKLayer, WholeBodyIKResult
from kinematics.wholebody.standing import Stance, StandingProblem, stance, standing_configuration, standing_problem
from kinematics.wholebody.step_plan import NoCompiledFormWarning
from kinematics.wholebody.stepper import StepGradients, WholeBodyStepper
from kinematics.wholebody.tasks import ComTask, FrameTask, PostureTask, RelativeFrameTask, Task

__all__ = [
    "CascadeStep",
    "ComInSupportPolygon",
    "ComTask",
    "ConfigurationLimit",
    "NoCompiledFormWarning",
    "Constraint",
    "Contact",
    "FrameTask",
    "PostureTask",
    "RelativeFrameTask",
    "StandingProblem",
    "StepGradients",
    "StepLimit",
    "Task",
    "WholeBodyIKCfg",
    "WholeBodyIKLayer",
    "WholeBodyIKResult",
    "WholeBodyStepper",
    "cascade_step",
    "Stance",
    "stance",
    "standing_configuration",
    "standing_problem",
]
