"""A click group whose commands are imported when one is asked for, not when the group is.

The recipe of click's documentation ("Lazily loading subcommands"), as inspect_ai's CLI has
it: each command is named by ``"module:attribute"`` with its one-line help beside it, so
``referee --help`` lists every command without importing one. The commands are a mapping
that imports on lookup (`LazyCommands`), so whatever reads ``group.commands`` (click itself,
mkdocs-click, a test walking the tree) gets the real commands, one import each.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

import click

__all__ = ["LazyCommands", "LazyGroup"]


class LazyCommands(MutableMapping[str, click.Command]):
    """Command name -> command, each imported from its ``"module:attribute"`` on first lookup."""

    def __init__(self, paths: Mapping[str, str]) -> None:
        self._paths = dict(paths)
        self._loaded: dict[str, click.Command] = {}

    def loaded(self, name: str) -> bool:
        """Whether `name`'s module is imported (or the command was added as an object)."""
        return name in self._loaded

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            path = self._paths[name]  # KeyError: not a command, as a dict says
            module, _, attribute = path.partition(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{path!r} is {command!r}, not a click command")
            self._loaded[name] = command
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        found = self._paths.pop(name, None), self._loaded.pop(name, None)
        if found == (None, None):
            raise KeyError(name)

    def __contains__(self, name: object) -> bool:  # (Mapping's would import the command)
        return name in self._paths or name in self._loaded

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._paths.keys() | self._loaded.keys()))

    def __len__(self) -> int:
        return len(self._paths.keys() | self._loaded.keys())


class LazyGroup(click.Group):
    """A group of commands named by import path, each with its one-line help (`lazy`).

    Args:
        lazy: Command name -> (``"module:attribute"``, the command's short help: what
            ``get_short_help_str`` gives for it, untruncated). The help lists a command not
            yet imported from this text, cut to the terminal as click cuts its own.
    """

    def __init__(self, *args: Any, lazy: Mapping[str, tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.short_helps = {name: short for name, (_, short) in lazy.items()}
        self._lazy = LazyCommands({name: path for name, (path, _) in lazy.items()})
        self.commands = self._lazy

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands section of the help, from the table for the commands not imported."""
        rows: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            if name in self.short_helps and not self._lazy.loaded(name):
                # A stand-in with the table's text: click shortens it as it would the real one.
                rows.append((name, click.Command(name, help=self.short_helps[name])))
            else:
                command = self.get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name, command))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, c.get_short_help_str(limit)) for name, c in rows])
