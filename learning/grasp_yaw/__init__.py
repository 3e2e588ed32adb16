"""The grasp-yaw experiment: a network chooses the yaw of a top-down Panda grasp, trained through the arm's IK layer, against heuristic, teacher, grid, online and zero-order baselines."""
