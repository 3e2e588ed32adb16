"""The project's typed errors: every bad input raises a subclass of ``ProjectError``."""

from __future__ import annotations


class ProjectError(Exception):
    """Base class of every error the library raises on purpose (``assets.MissingAssetError``, raised by the robot
    data package, which imports no other package of the project, is a ``FileNotFoundError`` instead)."""


class URDFError(ProjectError, ValueError):
    """The URDF text could not be parsed or describes an unsupported joint."""


class LinkNotFoundError(ProjectError, KeyError):
    """A link name is not in the URDF."""

    def __str__(self) -> str:  # KeyError would quote the whole message.
        return str(self.args[0]) if self.args else ""


class FrameNotFoundError(ProjectError, KeyError):
    """A frame (link) name is not in the kinematic tree."""

    def __str__(self) -> str:  # KeyError would quote the whole message.
        return str(self.args[0]) if self.args else ""


class InvalidQuaternionError(ProjectError, ValueError):
    """A base orientation quaternion is not (close to) unit or not finite."""


class MissingInertialError(ProjectError, ValueError):
    """A mass property was asked of a URDF whose links carry no mass."""


class NotAChainError(ProjectError, ValueError):
    """The root link is not an ancestor of the end link, so there is no serial chain between them."""


class ShapeError(ProjectError, ValueError):
    """A tensor has the wrong shape."""


class NonFiniteError(ProjectError, ValueError):
    """A tensor holds NaN or infinity."""


class DtypeDeviceMismatchError(ProjectError, TypeError):
    """An input's dtype or device differs from the module's."""


class InvalidTargetError(ProjectError, ValueError):
    """A target transform is not a valid SE(3) element."""


class CheckpointMismatchError(ProjectError, RuntimeError):
    """A state dict was saved from a layer built on another chain, TCP or configuration schema."""


class ConfigError(ProjectError, ValueError):
    """A configuration value is out of its valid range."""


class UnsupportedTransformError(ProjectError, NotImplementedError):
    """A path that supports first-order reverse-mode autograd only met forward-mode AD, a ``torch.func`` transform
    or a request for second-order gradients (``create_graph=True``)."""
