"""The README's Python examples run as written (so the first thing a user copies works)."""
import os
import re

import hl  # noqa: F401 - the examples import it themselves; this fails early if it cannot

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def test_readme_python_blocks_run():
    with open(README) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)
    assert blocks, "the README has no Python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
