"""The whole-body layer's constraints: what every level of the cascade keeps."""

from kinematics.wholebody.constraints.constraint import Constraint
from kinematics.wholebody.constraints.contact import Contact
from kinematics.wholebody.constraints.limits import ConfigurationLimit, StepLimit
from kinematics.wholebody.constraints.support_polygon import ComInSupportPolygon

__all__ = [
    "Constraint",
    "Contact",
    "ConfigurationLimit",
    "StepLimit",
    "ComInSupportPolygon",
]
