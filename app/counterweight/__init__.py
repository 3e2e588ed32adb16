"""The G1 scene (``python -m app --robot g1``): the counterweight experiment live."""
