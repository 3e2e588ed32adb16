"""The Viser viewer (``python -m app``): the Franka Panda in a browser, posed through this project's FK."""
