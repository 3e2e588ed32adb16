"""The Franka scene (``python -m app``): the grasp-yaw experiment live."""
