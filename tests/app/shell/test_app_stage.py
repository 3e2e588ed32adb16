"""The shared stage's lighting: ``--light`` turns off what software WebGL draws at seconds a frame (shadows and the
environment map), as messages the page really gets; without it, viser's own lighting is left as it is."""

from __future__ import annotations

import pytest
import viser
from viewer_support import free_port
from viser import _messages

from app.config import ViewerConfig
from app.grasp_yaw.workspace import CAMERA
from app.shell.stage import set_stage


def lighting_messages(light: bool) -> list:
    server = viser.ViserServer(port=free_port(), verbose=False)
    try:
        sent = []
        interface = server.scene._websock_interface
        queue = interface.queue_message
        interface.queue_message = lambda message: (sent.append(message), queue(message))[1]
        set_stage(server, CAMERA, light)
        return [m for m in sent if isinstance(m, (_messages.EnableLightsMessage, _messages.EnvironmentMapMessage))]
    finally:
        server.stop()


def test_light_sends_plain_lighting_and_the_default_leaves_viser_s() -> None:
    plain = lighting_messages(light=True)
    lights = [m for m in plain if isinstance(m, _messages.EnableLightsMessage)]
    environment = [m for m in plain if isinstance(m, _messages.EnvironmentMapMessage)]
    assert [(m.enabled, m.cast_shadow) for m in lights] == [(True, False)], "default lights on, no shadows"
    assert [m.hdri_data for m in environment] == [None], "no environment map"
    assert lighting_messages(light=False) == []


@pytest.mark.parametrize("robot", ["panda", "g1"])
def test_light_is_taken_by_both_scenes(robot: str) -> None:
    assert ViewerConfig.from_argv(["--robot", robot, "--light"]).light
    assert not ViewerConfig.from_argv(["--robot", robot]).light
