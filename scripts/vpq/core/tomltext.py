"""Edit a TOML file's text by tables, keeping its comments and layout.

The project's ledgers (``advisories.toml``, ``peer-tests.toml``, ...) are
written by people: comments explain entries, and a tool that rewrote them
from parsed data would lose those. Here a file is cut into *blocks*, one
per table header (``[a]``, ``["a".b]``, ``[[a]]``) with the comment lines
that sit right above it (no blank line between), and edits are made on
whole blocks or on one ``key = value`` line of a block. Values are written
by ``tomli_w``; every edit is checked by parsing the result with
``tomllib`` and comparing it with the same edit made on the parsed data.
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import tomli_w

from vpq.core.errors import VpqError

#: A table's key path: ``["a".b]`` -> ``("a", "b")``; ``None`` for the text
#: before the first header.
Path = tuple[str, ...]


class TomlTextError(VpqError):
    """A TOML text edit would not give the intended data (names the file)."""


@dataclass
class Block:
    """One table header's lines (comments just above it included), or the
    text before the first header (``path`` None)."""

    path: Path | None
    array: bool = False
    lines: list[str] = field(default_factory=list)

    def data(self) -> dict[str, Any]:
        """This block's own keys and values (its sub-tables' blocks apart)."""
        node: Any = tomllib.loads("".join(self.lines))
        for key in self.path or ():
            node = node[key]
        return cast(dict[str, Any], node[0] if self.array else node)


def _walk(data: dict[str, Any]) -> tuple[dict[str, Any], Path, bool]:
    """Down the single-key chain a lone header parses to: the innermost
    table, its path, and whether it is an array of tables' element."""
    path: list[str] = []
    node: Any = data
    while isinstance(node, dict) and len(node) == 1:
        key, node = next(iter(node.items()))
        path.append(key)
        if isinstance(node, list):
            return node[-1], tuple(path), True
    return node, tuple(path), False


def _header(line: str) -> tuple[Path, bool] | None:
    """The path of a table header line, or None for any other line."""
    stripped = line.strip()
    if not stripped.startswith("["):
        return None
    try:
        _, path, array = _walk(tomllib.loads(stripped + "\n"))
    except tomllib.TOMLDecodeError:
        return None
    return path, array


def split(text: str) -> list[Block]:
    """``text`` cut into blocks, in order; joined again they give ``text``."""
    blocks = [Block(None)]
    in_string = False
    for line in text.splitlines(keepends=True):
        head = None if in_string else _header(line)
        if line.count('"""') % 2 or line.count("'''") % 2:
            in_string = not in_string
        if head is None:
            blocks[-1].lines.append(line)
            continue
        above = blocks[-1].lines
        cut = len(above)
        while cut and above[cut - 1].lstrip().startswith("#"):
            cut -= 1
        blocks.append(Block(head[0], head[1], above[cut:] + [line]))
        del above[cut:]
    return blocks


def join(blocks: list[Block]) -> str:
    """The text of ``blocks``."""
    return "".join("".join(b.lines) for b in blocks)


def _remove(data: dict[str, Any], block: Block) -> None:
    """Take ``block``'s table (or array element) out of parsed ``data``."""
    *parents, last = block.path or ()
    node = data
    for key in parents:
        if key not in node:  # went with a parent table dropped before it
            return
        node = node[key]
    if block.array:
        node[last].remove(block.data())
        if not node[last]:
            del node[last]
    else:
        node.pop(last, None)


def _checked(new: str, expect: dict[str, Any], where: str) -> str:
    """``new`` when it parses to ``expect``; else a ``TomlTextError``."""
    try:
        got = tomllib.loads(new)
    except tomllib.TOMLDecodeError as exc:
        raise TomlTextError(f"{where}: the edit gives invalid TOML ({exc})") from None
    if got != expect:
        raise TomlTextError(f"{where}: the edit does not give the intended data; unchanged")
    return new


def _parsed(text: str, where: str) -> dict[str, Any]:
    """``text`` parsed; a ``TomlTextError`` naming ``where`` if it is not TOML."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlTextError(f"{where}: not valid TOML ({exc}); unchanged") from None


def drop_tables(
    text: str, drop: Callable[[Path, dict[str, Any]], bool], where: str
) -> tuple[str, int]:
    """``text`` without the blocks for which ``drop(path, the block's own
    data)`` holds (a table's sub-tables are blocks of their own, asked
    with their longer path), and how many went.

    Raises:
        TomlTextError: ``text`` is not TOML, or the result is not the
            intended data.
    """
    expect = _parsed(text, where)
    kept: list[Block] = []
    blocks = split(text)
    for block in blocks:
        if block.path is not None and drop(block.path, block.data()):
            _remove(expect, block)
        else:
            kept.append(block)
    return _checked(join(kept), expect, where), len(blocks) - len(kept)


def _statements(lines: list[str]) -> list[tuple[int, int, str]]:
    """The ``key = value`` statements of a block's lines: ``(first line,
    line after the last, key)``, a value over several lines included."""
    out: list[tuple[int, int, str]] = []
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith(("#", "[")) or not lines[i].strip():
            i += 1
            continue
        for j in range(i + 1, len(lines) + 1):
            try:
                parsed = tomllib.loads("".join(lines[i:j]))
            except tomllib.TOMLDecodeError:
                continue
            out.append((i, j, next(iter(parsed))))
            i = j
            break
        else:
            return out
    return out


def set_value(text: str, path: Path, key: str, value: object, where: str) -> str:
    """``text`` with ``key`` of table ``path`` set to ``value`` (its
    statement replaced, over however many lines, or added after the
    table's last statement).

    Raises:
        TomlTextError: no such table, or the result is not the intended data.
    """
    expect = copy.deepcopy(_parsed(text, where))
    node = expect
    for part in path:
        node = node.setdefault(part, {})
    node[key] = value
    line = tomli_w.dumps({key: value})
    blocks = split(text)
    block = next((b for b in blocks if b.path == path and not b.array), None)
    if block is None:
        raise TomlTextError(f"{where}: no table [{'.'.join(path)}]")
    at = _statements(block.lines)
    same = [(i, j) for i, j, k in at if k == key]
    if same:
        block.lines[same[0][0] : same[0][1]] = [line]
    else:
        block.lines.insert(at[-1][1] if at else len(block.lines), line)
    return _checked(join(blocks), expect, where)


def map_value(
    text: str, path: Path, key: str, fn: Callable[[Any], Any], where: str
) -> tuple[str, int]:
    """``text`` with ``key`` of the table at ``path`` (or of each element of
    the array of tables there) set to ``fn(its value)``, where it has the
    key; how many values changed.

    Raises:
        TomlTextError: ``text`` is not TOML, or the result is not the
            intended data.
    """
    expect = copy.deepcopy(_parsed(text, where))
    node: Any = expect
    for part in path:
        node = node.get(part, {}) if isinstance(node, dict) else {}
    for table in node if isinstance(node, list) else [node]:
        if isinstance(table, dict) and key in table:
            table[key] = fn(table[key])
    blocks = split(text)
    count = 0
    for block in (b for b in blocks if b.path == path):
        old = block.data().get(key)
        if old is None or (new := fn(old)) == old:
            continue
        i, j = next((i, j) for i, j, k in _statements(block.lines) if k == key)
        block.lines[i:j] = [tomli_w.dumps({key: new})]
        count += 1
    return _checked(join(blocks), expect, where), count
