"""README's two commands, as the tests that hold them read them."""

from __future__ import annotations

import re

SECTION = "## The two commands"


def readme_commands(readme: str) -> list[str]:
    """The command lines of README's first ``bash`` block under "The two
    commands", without their trailing comments."""
    section = readme.split(SECTION, 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block, "README's two-commands section has no bash block"
    return [ln.split("  #", 1)[0].strip() for ln in block.group(1).splitlines() if ln.strip()]
