"""Types for command-line arguments that both command lines (``python -m learning`` and ``python -m app``) take."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1; what was wrong in the message argparse prints."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value
