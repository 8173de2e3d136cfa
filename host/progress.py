"""A one-line live progress bar on stderr (only when stderr is a terminal)."""

from __future__ import annotations

import sys
import time


class Progress:
    """``Progress(total, label)``; ``update(done, text)``; ``close()``.

    Redraws at most 10 times a second; shows done/total, a bar, ``text``, steps/s and
    the time left. Disabled (no output at all) when ``enabled`` is False.
    """

    def __init__(
        self, total: int, label: str = "", enabled: bool | None = None, stream=None, start: int = 0
    ):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.total, self.label, self.start = total, label, start
        self.t0 = time.perf_counter()
        self.last = 0.0
        self.done = start
        self.text = ""

    def update(self, done: int, text: str = "") -> None:
        self.done, self.text = done, text
        now = time.perf_counter()
        if self.enabled and (now - self.last >= 0.1 or done >= self.total):
            self.last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        el = max(now - self.t0, 1e-9)
        rate = (self.done - self.start) / el
        left = (self.total - self.done) / rate if rate > 0 else float("nan")
        frac = self.done / self.total if self.total else 1.0
        bar = "#" * int(24 * frac) + "-" * (24 - int(24 * frac))
        eta = f"{left:4.0f}s left" if left == left else "   ?s left"
        self.stream.write(
            f"\r{self.label} step {self.done}/{self.total} [{bar}] {self.text} "
            f"{rate:5.1f} steps/s {eta} "
        )
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.perf_counter())
            self.stream.write("\n")
            self.stream.flush()


def stage_lines(tag: str, stream=None):
    """A callable that prints a long command's stage lines on stderr, each after
    ``[tag <seconds since this call>s]`` (``pentegg build``, ``pentegg synth``)."""
    t0 = time.monotonic()

    def say(line: str) -> None:
        print(
            f"[{tag} {time.monotonic() - t0:6.1f}s] {line}", file=stream or sys.stderr, flush=True
        )

    return say
