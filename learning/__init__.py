"""The lab beside the library: the grasp-yaw experiment (``grasp_yaw``), the counterweight experiment
(``counterweight``), the benchmark against the peers (``benchmark``) and what they share (``common``);
``python -m learning`` runs the experiments."""

import learning.common.threads  # noqa: F401, E402  (first: every entry point under learning/ waits passively)
