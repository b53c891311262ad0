"""``python -m referee.cli``: the ``referee`` command (as ``python -m referee``)."""

from referee.cli import main

main()
