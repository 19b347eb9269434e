"""The standalone xhpl of the main job, built once when it is not found: `run` and `run -w` both.

Built through HPL's own build recipe (the registry's, as `clusterbench build hpl` does; the build
cache keeps it), under whatever the caller shows while it builds. A build that fails is not an
error of the job: the caller goes on without the standalone HPL and says why.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from clusterbench.bench.registry import build_recipe
from clusterbench.build.common import Built
from clusterbench.errors import UserInputError

WHAT = "xhpl (`clusterbench build hpl`, once)"  # what the caller says is being built


def build_xhpl(building: Callable[[str], AbstractContextManager],
               mpi: str | None = None) -> tuple[Built | None, str | None]:
    """(the build, None), or (None, why it could not be built)."""
    try:
        with building(WHAT):
            return build_recipe("hpl").build(mpi=mpi), None
    except UserInputError as exc:
        return None, exc.message
