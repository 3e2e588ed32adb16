"""The viewer (``python -m app``): two scenes, the Franka grasp-yaw scene (``grasp_yaw``) and the G1 counterweight
scene (``counterweight``), on a shell that knows neither (``shell``)."""

import learning.common.threads  # noqa: F401, E402  (first: the viewer's process waits passively)
