"""Every ``example`` block of docs/spec.md holds, evaluated against pentegg.golden."""

import re
from pathlib import Path

import numpy as np
import pytest

import pentegg.golden as g
from pentegg.golden.config import Config
from pentegg.tasks import task_defaults

SPEC = Path(__file__).resolve().parents[1] / "docs" / "spec.md"


def _examples():
    text = SPEC.read_text()
    out = []
    for block in re.finditer(r"```example\n(.*?)```", text, re.S):
        line0 = text[: block.start()].count("\n") + 2
        for i, line in enumerate(block.group(1).splitlines()):
            if line.strip():
                out.append(pytest.param(line.strip(), id=f"spec.md:{line0 + i}"))
    return out


EXAMPLES = _examples()


def test_spec_has_examples_for_every_section():
    text = SPEC.read_text()
    sections = re.split(r"\n## ", text)[1:]
    numbered = [s for s in sections if re.match(r"\d+\.", s)]
    without = [s.splitlines()[0] for s in numbered if "```example" not in s]
    # 10 (step order) and 11 (file format) are procedures, checked by their own tests
    assert all(s.startswith(("10.", "11.")) for s in without), without
    assert len(EXAMPLES) >= 30


@pytest.mark.parametrize("expr", EXAMPLES)
def test_spec_example_holds(expr):
    ns = {name: getattr(g, name) for name in g.__all__}
    ns.update(np=np, Config=Config, task_defaults=task_defaults)
    assert eval(expr, ns), f"spec example does not hold: {expr}"
