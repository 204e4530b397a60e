"""Reading JSON or YAML data a user hands us: answers files, script files, manifests, presets,
``--var``/``--answer`` JSON values. One reader so every surface words its failures the same way;
each caller wraps ``DataFileError`` into its own error type.

Bounds, so no input can take the process down:

* the file is a regular file of bounded size (``gitrefs.persist.inputs``: a FIFO, ``/dev/zero`` or a
  directory is refused at once, not read);
* nesting is at most ``MAX_DEPTH`` levels (checked before or while parsing, never by a
  RecursionError);
* YAML aliases may not expand the document beyond ``MAX_YAML_NODES`` nodes (a billion-laughs
  file is refused after composing its few hundred nodes, never expanded), and a recursive
  alias is refused;
* JSON numbers must be finite (``NaN``, ``Infinity``, ``1e999`` are refused).

An answers file is JSON; it is read as YAML only when its name ends in ``.yaml``/``.yml``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gitrefs.persist.inputs import ANSWERS_LIMIT, InputFileError, Limit, read_bounded

if TYPE_CHECKING:  # YAML is imported by the readers of YAML: a JSON answers file, a node's JSON
    # output (iterion.engine.coerce) and every command that never reads YAML start without it
    from yaml.nodes import Node

MAX_DEPTH = 100
MAX_YAML_NODES = 1_000_000
YAML_SUFFIXES = (".yaml", ".yml")


class DataFileError(ValueError):
    pass


def _too_deep(what: str) -> DataFileError:
    return DataFileError(f"{what} nests deeper than {MAX_DEPTH} levels")


def check_json_depth(text: str, what: str) -> None:
    """Refuse JSON text whose brackets nest deeper than MAX_DEPTH (one linear scan, strings skipped)."""
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise _too_deep(what)
        elif ch in "]}":
            depth -= 1


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} is not finite")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def loads_json(text: str, what: str) -> Any:
    """Parse JSON with bounded nesting and finite numbers only; DataFileError otherwise."""
    check_json_depth(text, what)
    try:
        return json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except ValueError as exc:  # json.JSONDecodeError is one
        raise DataFileError(f"{what} is not valid JSON: {_one_line(exc)}") from None


_loader_class: Any = None
_nodes: Any = None  # yaml.nodes, once a YAML document was read


def _bounded_loader(text: str) -> Any:
    """A SafeLoader that refuses deep nesting while composing (before recursion can run away)."""
    global _loader_class, _nodes
    if _loader_class is None:
        import yaml
        import yaml.nodes

        _nodes = yaml.nodes

        class _BoundedLoader(yaml.SafeLoader):
            def __init__(self, stream: str) -> None:
                super().__init__(stream)
                self._depth = 0
                self.what = "YAML"

            def compose_node(self, parent: Node | None, index: Any) -> Node:  # type: ignore[override]
                self._depth += 1
                try:
                    if self._depth > MAX_DEPTH:
                        raise _too_deep(self.what)
                    return super().compose_node(parent, index)  # type: ignore[no-any-return]
                finally:
                    self._depth -= 1

        _loader_class = _BoundedLoader
    return _loader_class(text)


def _children(node: Node) -> list[Node]:
    if isinstance(node, _nodes.SequenceNode):
        return list(node.value)
    if isinstance(node, _nodes.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root: Node, what: str) -> None:
    """Expanded size and depth of the composed graph (aliases counted every time they are used),
    computed once per distinct node: linear in the document, whatever the aliases multiply."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            active.discard(key)
            if size[key] > MAX_YAML_NODES:
                raise DataFileError(f"{what} expands to more than {MAX_YAML_NODES:,} values through YAML aliases")
            if depth[key] > MAX_DEPTH:
                raise _too_deep(what)
            continue
        if key in size:
            continue
        if key in active:
            raise DataFileError(f"{what} holds a recursive YAML alias")
        active.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in size)


def loads_yaml(text: str, what: str) -> Any:
    """Parse YAML (safe types only) with bounded nesting and bounded alias expansion."""
    import yaml

    loader = _bounded_loader(text)
    loader.what = what
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, what)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise DataFileError(f"{what} is not valid YAML: {_one_line(exc)}") from None
    finally:
        loader.dispose()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def read_data(path: Path, what: str, *, limit: Limit = ANSWERS_LIMIT,
              fmt: Literal["by_suffix", "yaml"] = "by_suffix") -> Any:
    """The parsed content of ``path``: JSON, or YAML when ``fmt`` is ``"yaml"`` (a superset of
    JSON) or the name ends in ``.yaml``/``.yml``. Every failure is a one-line DataFileError."""
    try:
        data = read_bounded(path, what, limit)
    except InputFileError as exc:
        raise DataFileError(exc.message) from None
    except FileNotFoundError:
        raise DataFileError(f"{what} {path} does not exist") from None
    except OSError as exc:
        raise DataFileError(f"{what} {path} cannot be read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataFileError(f"{what} {path} is not UTF-8 text (byte {exc.start})") from None
    label = f"{what} {path}"
    if fmt == "yaml" or path.suffix.lower() in YAML_SUFFIXES:
        return loads_yaml(text, label)
    return loads_json(text, label)


def read_mapping(path: Path, what: str, *, shape: str = "must hold a JSON object", limit: Limit = ANSWERS_LIMIT,
                 fmt: Literal["by_suffix", "yaml"] = "by_suffix") -> dict[str, Any]:
    """``read_data`` that must hold one top-level mapping."""
    data = read_data(path, what, limit=limit, fmt=fmt)
    if not isinstance(data, dict):
        raise DataFileError(f"{what} {path} {shape}")
    return data
