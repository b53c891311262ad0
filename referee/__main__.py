"""``python -m referee``: the ``referee`` command."""

from referee.cli import main

main()
