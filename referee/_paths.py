"""Where referee keeps what it can rebuild (the judge cache, rebuilt models, litellm's answers).

One folder for all of it, so that one variable moves it: a read-only home, a shared disk on a
cluster, a test's temporary folder.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path:
    """``$REFEREE_CACHE_DIR``, else ``$XDG_CACHE_HOME/referee``, else ``~/.cache/referee``."""
    base = os.environ.get("REFEREE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "referee"
    )
    return Path(base)
