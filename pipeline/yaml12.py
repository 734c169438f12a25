"""YAML read with the YAML 1.2 core schema, and a duplicated key as an error naming both lines.

PyYAML implements YAML 1.1, whose implicit types turn ``010`` into 8 (octal), ``1:30`` into 90
(sexagesimal) and ``yes``/``no``/``on``/``off`` into booleans; DVC (ruamel.yaml) reads the same
``params.yaml`` as YAML 1.2, where those are 10, the text ``1:30`` and text. ``load`` uses the
1.2 core schema (YAML 1.2.2, section 10.3.2) so both read the same values:

* null: ``null``, ``Null``, ``NULL``, ``~``, nothing;
* booleans: ``true``/``false`` in three capitalisations, nothing else;
* integers: decimal ``[-+]?[0-9]+`` (a leading 0 is still decimal), ``0o17``, ``0xff``;
* floats: ``1.5``, ``.5``, ``1e-3``, ``.inf``, ``.nan``;
* anything else is text.

A key given twice in one mapping is a ``DuplicateKeyError`` naming the key and both line
numbers: PyYAML (and YAML 1.1 practice) silently keeps the last one, which is how a second
``ingest:`` block once replaced the first one's 43 runs by 20 with exit status 0.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.resolver import BaseResolver

from pipeline.bounded import short

# PyYAML matches resolvers with ``re.match``: anchored at both ends here.
CORE_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
CORE_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
CORE_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
CORE_NULL = re.compile(r"^(?:null|Null|NULL|~|)$")


class DuplicateKeyError(yaml.YAMLError):
    """A mapping that gives one key twice; the message names the key and both lines."""

    def __init__(self, key: Any, first_line: int, second_line: int) -> None:
        super().__init__(f"duplicate key {short(key)} at lines {first_line} and {second_line} "
                         "(YAML keeps only the last; remove or rename one)")
        self.key, self.lines = key, (first_line, second_line)


class CoreResolver(BaseResolver):
    """Implicit tags of the YAML 1.2 core schema (no 1.1 octal, sexagesimal or yes/no)."""


CoreResolver.add_implicit_resolver("tag:yaml.org,2002:bool", CORE_BOOL, list("tTfF"))
CoreResolver.add_implicit_resolver("tag:yaml.org,2002:int", CORE_INT, list("-+0123456789"))
CoreResolver.add_implicit_resolver("tag:yaml.org,2002:float", CORE_FLOAT,
                                   list("-+0123456789."))
CoreResolver.add_implicit_resolver("tag:yaml.org,2002:null", CORE_NULL, ["~", "n", "N", ""])


def first_duplicate(node: yaml.MappingNode) -> DuplicateKeyError | None:
    """The first key of ``node`` given twice (scalar keys compared as written), or None."""
    seen: dict[str, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        line = key_node.start_mark.line + 1
        if key_node.value in seen:
            return DuplicateKeyError(key_node.value, seen[key_node.value], line)
        seen[key_node.value] = line
    return None


class CoreConstructor(SafeConstructor):
    """``SafeConstructor`` with 1.2 core integers, floats and booleans, and duplicate keys
    refused."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            duplicate = first_duplicate(node)
            if duplicate is not None:
                raise duplicate
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: Any) -> int:
        text = self.construct_scalar(node)
        if text.startswith("0o"):
            return int(text[2:], 8)
        if text.startswith("0x"):
            return int(text[2:], 16)
        try:
            return int(text)
        except ValueError as exc:  # over Python's 4,300-digit limit
            raise yaml.constructor.ConstructorError(
                None, None, f"integer of {len(text)} digits is too long", node.start_mark
            ) from exc

    def construct_yaml_float(self, node: Any) -> float:
        text = self.construct_scalar(node).lower()
        if text.endswith(".inf"):
            return float("-inf") if text.startswith("-") else float("inf")
        if text == ".nan":
            return float("nan")
        return float(text)

    def construct_yaml_bool(self, node: Any) -> bool:
        return self.construct_scalar(node).lower() == "true"


CoreConstructor.add_constructor("tag:yaml.org,2002:int", CoreConstructor.construct_yaml_int)
CoreConstructor.add_constructor("tag:yaml.org,2002:float", CoreConstructor.construct_yaml_float)
CoreConstructor.add_constructor("tag:yaml.org,2002:bool", CoreConstructor.construct_yaml_bool)


class CoreLoader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser,
                 yaml.composer.Composer, CoreConstructor, CoreResolver):
    """A safe loader with the YAML 1.2 core schema and duplicate keys refused."""

    def __init__(self, stream: Any) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        CoreConstructor.__init__(self)
        CoreResolver.__init__(self)


def load(text: str) -> Any:
    """``text`` as YAML 1.2 core; raises ``yaml.YAMLError`` (``DuplicateKeyError`` among
    them)."""
    return yaml.load(text, Loader=CoreLoader)
