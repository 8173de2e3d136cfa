"""Checks of elaboration parameters: errors name the parameter and its allowed range."""

from __future__ import annotations

__all__ = ["check_choice", "check_int"]


def check_int(name: str, value, lo: int, hi: int) -> int:
    """``value`` if it is an integer in ``lo..hi``, else ``ValueError``."""
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{name}={value!r} is not an integer in {lo}..{hi}")
    return value


def check_choice(name: str, value, choices) -> object:
    """``value`` if it is one of ``choices``, else ``ValueError`` listing them."""
    if value not in choices:
        raise ValueError(f"{name}={value!r} is not one of {', '.join(map(str, choices))}")
    return value
