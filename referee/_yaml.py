"""YAML read as referee reads its own files (specs, rubrics): `yaml.safe_load`, refusing a
document whose aliases expand past what a file of ours may hold, or that gives one key twice in
a mapping (YAML keeps the last silently: two components named `answer` became one), before
anything is built."""

from __future__ import annotations

from typing import Any

import yaml

from referee.errors import SpecError

__all__ = ["safe_load"]

_MAX_NODES = 1_000_000
"""The most YAML nodes a spec may hold once its aliases are expanded. An alias is cheap to
write and costs nothing to parse, but everything that walks the loaded spec walks the
expansion: nine lines of nested aliases (a "billion laughs") expand to 10**9 nodes."""


def safe_load(text: str, source: str) -> Any:
    """`yaml.safe_load`, refusing a document whose aliases expand past `_MAX_NODES` nodes
    (or refer to themselves) before anything is built from it.

    Raises:
        SpecError: The aliases expand too far; the message names `source`.
        yaml.YAMLError: The text is not valid YAML.
    """
    loader = yaml.SafeLoader(text)
    loader.name = source  # PyYAML's marks say "<unicode string>" where this names the file
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node)
        if size > _MAX_NODES or size < 0:
            how = "refer to themselves" if size < 0 else f"expand to over {_MAX_NODES} nodes"
            raise SpecError(
                f"the YAML's aliases (*name) {how} (a 'billion laughs'), more than a spec or "
                "rubric may hold; write the repeated parts out, or refer to a file",
                source=source,
            )
        twice = _repeated_key(node)
        if twice is not None:
            key, first, again = twice
            raise SpecError(
                f"the key {key!r} is given twice in one mapping (lines {first} and {again}); "
                "YAML would keep only the last: rename one, or merge them",
                source=f"{source}:{again}",
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _repeated_key(root: yaml.Node) -> tuple[str, int, int] | None:
    """The first key given twice in one mapping (a merge's ``<<`` aside), with the lines of
    both; each node as written is looked at once."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            lines: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    line = key.start_mark.line + 1
                    if (key.tag, key.value) in lines:
                        return key.value, lines[(key.tag, key.value)], line
                    lines[(key.tag, key.value)] = line
                stack.extend((key, value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return None


def _expanded_size(root: yaml.Node) -> int:
    """How many nodes `root` has with every alias expanded, counted in time linear in the
    nodes as written (each shared node once); -1 for a node that contains itself."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        kids: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            kids = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            kids = [part for pair in node.value for part in pair]
        if children_done:
            on_path.discard(key)
            total = 1
            for kid in kids:
                total += sizes[id(kid)]
                if total > _MAX_NODES:
                    return total  # no need to count further
            sizes[key] = total
            continue
        if key in sizes:
            continue
        if key in on_path:
            return -1  # a recursive alias: endless once expanded
        on_path.add(key)
        stack.append((node, True))
        stack.extend((kid, False) for kid in kids if id(kid) not in sizes)
    return sizes[id(root)]
