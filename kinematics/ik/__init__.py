"""The arm's differentiable IK layer: the DLS step, the fused solve, implicit gradients, the box QP step."""
