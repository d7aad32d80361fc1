"""Is the plugin version a KafkaConnector asks for installed? Checked before anything is sent.

Why: Kafka Connect 4.1+ (KIP-891) loads the version of a plugin that ``connector.plugin.version``
(``spec.version``) names, a version or a Maven range. Asked for a version no worker has, Connect
4.3.1 answers ``POST /connectors`` with a 500 that says nothing useful (``Cannot invoke
"java.util.List.stream()" because the return value of "...VersionedPluginLoadingException
.availableVersions()" is null``). The workers list what they have (``GET
/connector-plugins?connectorsOnly=false``: class, type, version of every connector, converter,
transformation and predicate), so the operator refuses such a spec itself, naming the versions the
workers have, before any write.

What Connect does, restated (``org.apache.kafka.connect.util.PluginVersionUtils
.connectorVersionRequirement``): ``latest`` means no requirement; otherwise the text (trimmed) is
parsed by Maven's ``VersionRange.createFromVersionSpec``, and a bare version without brackets
(Maven's "soft" requirement) is made a hard one, ``4.3.1`` -> ``[4.3.1]``. An installed version
matches when the range contains it, compared by Maven's ``ComparableVersion``. A plugin class may
be named by its alias (simple class name, or with the ``Connector`` / ``Converter`` ...
suffix pruned; ``PluginUtils.computeAliases``), when the alias names one class only.

Which keys are checked: ``connector.plugin.version`` against the connector's class, and the
``<prefix>.plugin.version`` keys KIP-891 adds for what spec.config names: ``key.converter``,
``value.converter`` (type ``converter``), ``header.converter`` (``header_converter``),
``transforms.<alias>`` and ``predicates.<alias>`` (their ``.type``). A version whose class the
config does not name (a converter the worker's defaults choose) cannot be checked here and is
left to Connect, as is a class the workers do not have at all (Connect's own 400 names it).

Maven's rules are ported here, typed, from maven-artifact 3.9.15 (the jar Kafka 4.3.1 ships):
the Python ports on PyPI follow older Maven (no ``.X1`` read as ``-X1``, no MNG-6964) and are
untyped. ``tests/unit/test_plugin_versions.py`` holds comparisons and range answers produced by
that jar.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cmp_to_key
from typing import Final, Protocol

from connect_offsets.errors import UserError

#: The connector config key of the connector's own plugin version (``spec.version``).
CONNECTOR_VERSION_KEY: Final = "connector.plugin.version"
_VERSION_SUFFIX: Final = ".plugin.version"
#: Connect's word for "no requirement: the newest installed".
LATEST: Final = "latest"
#: The version Connect lists as absent (``PluginDesc.UNDEFINED_VERSION``; the REST answer omits it).
UNDEFINED_VERSION: Final = "undefined"
#: Ready reason: a version or range that matches no installed version of the plugin.
NOT_INSTALLED_REASON: Final = "PluginVersionNotInstalled"
#: Ready reason: a version text Maven cannot parse (Connect answers 400 with the same words).
INVALID_REASON: Final = "InvalidSpec"
#: Most installed versions named in a refusal (a worker may keep dozens).
MAX_VERSIONS_SHOWN: Final = 20

_QUALIFIERS: Final = ("alpha", "beta", "milestone", "rc", "snapshot", "", "sp")
_ALIASES: Final = {"ga": "", "final": "", "release": "", "cr": "rc"}
_RELEASE_INDEX: Final = str(_QUALIFIERS.index(""))


class InstalledPlugin(Protocol):
    """One entry of ``GET /connector-plugins?connectorsOnly=false`` (``clients.connect``'s
    ``PluginInfo`` is one): ``type`` is Connect's lower-case ``PluginType`` (source, sink,
    converter, header_converter, transformation, predicate); ``version`` None when Connect left it
    out (undefined)."""

    @property
    def class_name(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def version(self) -> str | None: ...


class InvalidVersionSpec(UserError):
    """Maven's ``InvalidVersionSpecificationException``: the text is not a version or a range (a
    user's spec: fixed by changing it, never by a retry)."""


# --------------------------------------------------------------------------------------------------
# Maven's ComparableVersion
# --------------------------------------------------------------------------------------------------

# An item is a _Number (Maven's Int/Long/BigIntegerItem, whose cross-type order is the numeric
# order), a _Qualifier (StringItem) or a list (ListItem).


@dataclass(frozen=True)
class _Number:
    """A number of any length, as its digits without leading zeros ("0" for zero). Not an int:
    Python refuses to convert more than 4,300 digits, and whoever answers at spec.url writes the
    versions."""

    digits: str

    @staticmethod
    def of(text: str) -> _Number:
        # Java's Character.isDigit takes every Unicode decimal digit (Nd); compare them as 0-9.
        ascii_digits = text if text.isascii() else "".join(str(unicodedata.decimal(c)) for c in text)
        return _Number(ascii_digits.lstrip("0") or "0")

    def compare(self, other: _Number) -> int:
        mine, theirs = (len(self.digits), self.digits), (len(other.digits), other.digits)
        return (mine > theirs) - (mine < theirs)


_ZERO: Final = _Number("0")


@dataclass(frozen=True)
class _Qualifier:
    value: str

    @staticmethod
    def of(text: str, followed_by_digit: bool) -> _Qualifier:
        if followed_by_digit and len(text) == 1:
            text = {"a": "alpha", "b": "beta", "m": "milestone"}.get(text, text)
        return _Qualifier(_ALIASES.get(text, text))

    def comparable(self) -> str:
        return str(_QUALIFIERS.index(self.value)) if self.value in _QUALIFIERS else f"{len(_QUALIFIERS)}-{self.value}"


def _is_null(item: object) -> bool:
    if isinstance(item, _Number):
        return item == _ZERO
    if isinstance(item, _Qualifier):
        return item.comparable() == _RELEASE_INDEX
    assert isinstance(item, list)
    return not item


def _sign(a: str, b: str) -> int:
    return (a > b) - (a < b)


def _compare(left: object, right: object) -> int:
    """``Item.compareTo`` of ComparableVersion (``right`` None: the shorter side ran out)."""
    if isinstance(left, _Number):
        if right is None:
            return 0 if left == _ZERO else 1
        if isinstance(right, _Number):
            return left.compare(right)
        return 1  # 1.1 > 1-sp, 1.1 > 1-1
    if isinstance(left, _Qualifier):
        if right is None:
            return _sign(left.comparable(), _RELEASE_INDEX)  # 1-rc < 1, 1-ga == 1
        if isinstance(right, _Qualifier):
            return _sign(left.comparable(), right.comparable())
        return -1  # 1.any < 1.1, 1.any < 1-1
    assert isinstance(left, list)
    if right is None:
        for item in left:  # MNG-6964: the whole list, not only its first item
            result = _compare(item, None)
            if result != 0:
                return result
        return 0
    if isinstance(right, _Number):
        return -1  # 1-1 < 1.0.x
    if isinstance(right, _Qualifier):
        return 1  # 1-1 > 1-sp
    assert isinstance(right, list)
    for index in range(max(len(left), len(right))):
        r_item = right[index] if index < len(right) else None
        # The shorter side ran out: compare the other's item with nothing, the sign turned.
        result = _compare(left[index], r_item) if index < len(left) else -_compare(r_item, None)
        if result != 0:
            return result
    return 0


def _normalize(items: list[object]) -> None:
    """Remove trailing null items (0, "", empty lists) up to the last non-list item."""
    for index in range(len(items) - 1, -1, -1):
        if _is_null(items[index]):
            del items[index]
        elif not isinstance(items[index], list):
            break


def _parse_item(is_digit: bool, text: str) -> object:
    if is_digit:
        return _Number.of(text)
    return _Qualifier.of(text, False)


def _parse(version: str) -> list[object]:
    """``ComparableVersion.parseVersion``: items split on '.', '-' and digit/letter transitions."""
    text = version.lower()
    items: list[object] = []
    current = items
    stack: list[list[object]] = [items]
    is_digit = False
    start = 0

    def sublist() -> list[object]:
        nonlocal current
        new: list[object] = []
        current.append(new)
        stack.append(new)
        current = new
        return new

    for index, char in enumerate(text):
        if char == ".":
            current.append(_ZERO if index == start else _parse_item(is_digit, text[start:index]))
            start = index + 1
        elif char == "-":
            current.append(_ZERO if index == start else _parse_item(is_digit, text[start:index]))
            start = index + 1
            sublist()
        elif char.isdecimal():  # Java's Character.isDigit: Unicode Nd
            if not is_digit and index > start:
                # 1.0.0.X1 < 1.0.0-X2: treat .X as -X for any string qualifier X
                if current:
                    sublist()
                current.append(_Qualifier.of(text[start:index], True))
                start = index
                sublist()
            is_digit = True
        else:
            if is_digit and index > start:
                current.append(_parse_item(True, text[start:index]))
                start = index
                sublist()
            is_digit = False
    if len(text) > start:
        if not is_digit and current:
            sublist()
        current.append(_parse_item(is_digit, text[start:]))
    for items_list in reversed(stack):
        _normalize(items_list)
    return items


@dataclass(frozen=True)
class MavenVersion:
    """A version as Maven's ``ComparableVersion`` orders it (``4.3.1-SNAPSHOT < 4.3.1 < 4.3.1-1``)."""

    text: str
    items: tuple[object, ...]

    @staticmethod
    def parse(text: str) -> MavenVersion:
        return MavenVersion(text, tuple(_parse(text)))

    def compare(self, other: MavenVersion) -> int:
        return _compare(list(self.items), list(other.items))


def compare_versions(left: str, right: str) -> int:
    """-1, 0 or 1 as Maven orders two version texts."""
    return MavenVersion.parse(left).compare(MavenVersion.parse(right))


# --------------------------------------------------------------------------------------------------
# Maven's VersionRange
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Restriction:
    lower: MavenVersion | None
    lower_inclusive: bool
    upper: MavenVersion | None
    upper_inclusive: bool

    def contains(self, version: MavenVersion) -> bool:
        if self.lower is not None:
            c = self.lower.compare(version)
            if c > 0 or (c == 0 and not self.lower_inclusive):
                return False
        if self.upper is not None:
            c = self.upper.compare(version)
            if c < 0 or (c == 0 and not self.upper_inclusive):
                return False
        return True


def _restriction(spec: str, whole: str) -> _Restriction:
    """``VersionRange.parseRestriction`` (maven-artifact 3.9)."""
    lower_inclusive, upper_inclusive = spec.startswith("["), spec.endswith("]")
    inner = spec[1:-1].strip()
    if "," not in inner:
        if not (lower_inclusive and upper_inclusive):
            raise InvalidVersionSpec(f"Single version must be surrounded by []: {spec}")
        version = MavenVersion.parse(inner)
        return _Restriction(version, True, version, True)
    lower_text, upper_text = (part.strip() for part in inner.split(",", 1))
    lower = MavenVersion.parse(lower_text) if lower_text else None
    upper = MavenVersion.parse(upper_text) if upper_text else None
    if lower is not None and upper is not None:
        order = upper.compare(lower)
        if order < 0 or (order == 0 and not (lower_inclusive and upper_inclusive)):
            raise InvalidVersionSpec(f"Range defies version ordering: {whole}")
    return _Restriction(lower, lower_inclusive, upper, upper_inclusive)


@dataclass(frozen=True)
class VersionRequirement:
    """What a ``*.plugin.version`` value asks for, as Connect reads it (a hard requirement)."""

    text: str
    restrictions: tuple[_Restriction, ...]

    def contains(self, version: str | None) -> bool:
        parsed = MavenVersion.parse(UNDEFINED_VERSION if version is None else version)
        return any(r.contains(parsed) for r in self.restrictions)


def _create_from_version_spec(spec: str) -> tuple[list[_Restriction], bool]:
    """``VersionRange.createFromVersionSpec``: the restrictions, and whether it was a bare
    version (a recommended version, no restrictions of its own)."""
    restrictions: list[_Restriction] = []
    process = spec
    upper_bound: MavenVersion | None = None
    while process.startswith(("[", "(")):
        exclusive, inclusive = process.find(")"), process.find("]")
        index = inclusive
        if (inclusive < 0 or exclusive < inclusive) and exclusive >= 0:
            index = exclusive
        if index < 0:
            raise InvalidVersionSpec(f"Unbounded range: {spec}")
        restriction = _restriction(process[: index + 1], spec)
        if upper_bound is not None and (restriction.lower is None or restriction.lower.compare(upper_bound) < 0):
            raise InvalidVersionSpec(f"Ranges overlap: {spec}")
        restrictions.append(restriction)
        upper_bound = restriction.upper
        process = process[index + 1 :].strip()
        if process.startswith(","):
            process = process[1:].strip()
    if process:
        if restrictions:
            raise InvalidVersionSpec(f"Only fully-qualified sets allowed in multiple set scenario: {spec}")
        return [], True
    return restrictions, False


def version_requirement(text: str) -> VersionRequirement | None:
    """What Connect requires for this value (``connectorVersionRequirement``); None: ``latest``,
    no requirement. Raises InvalidVersionSpec with Maven's words."""
    if text == LATEST:
        return None
    spec = text.strip()
    restrictions, bare = _create_from_version_spec(spec)
    if bare or not restrictions:
        restrictions, _ = _create_from_version_spec(f"[{spec}]")
    return VersionRequirement(spec, tuple(restrictions))


# --------------------------------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------------------------------

_PLUGIN_KEY = re.compile(r"^(?:(key\.converter|value\.converter|header\.converter)|(transforms|predicates)\.(.+))$")
_CONNECTOR_TYPES: Final = ("source", "sink")


@dataclass(frozen=True)
class VersionRefusal:
    """Why the config cannot be sent: the reason (a Ready reason) and a message naming the field."""

    reason: str
    message: str


def _simple_name(class_name: str) -> str:
    return class_name.rsplit(".", 1)[-1].rsplit("$", 1)[-1]


def _type_suffix(plugin_type: str) -> str:
    """What ``prunedName`` strips: "Connector" for connectors, else the simple name of the
    plugin type's interface (``PluginType.simpleName``: Converter, HeaderConverter,
    Transformation, Predicate), which is the type's name in camel case."""
    if plugin_type in _CONNECTOR_TYPES:
        return "Connector"
    return "".join(part.capitalize() for part in plugin_type.split("_"))


def _pruned_name(class_name: str, plugin_type: str) -> str:
    simple = _simple_name(class_name)
    position = simple.rfind(_type_suffix(plugin_type))
    return simple[:position] if position > 0 else simple


def _aliases(installed: Iterable[InstalledPlugin]) -> dict[str, str]:
    """``PluginUtils.computeAliases``: simple and pruned names that name exactly one class."""
    seen: dict[str, set[str]] = {}
    for plugin in installed:
        for alias in (_simple_name(plugin.class_name), _pruned_name(plugin.class_name, plugin.type)):
            seen.setdefault(alias, set()).add(plugin.class_name)
    return {alias: next(iter(names)) for alias, names in seen.items() if len(names) == 1}


def installed_versions(installed: Iterable[InstalledPlugin], class_name: str, types: Iterable[str]) -> list[str]:
    """The distinct versions of one class (of these plugin types), newest first by Maven's order."""
    wanted = set(types)
    versions = {p.version or UNDEFINED_VERSION for p in installed if p.class_name == class_name and p.type in wanted}
    return sorted(versions, key=cmp_to_key(compare_versions), reverse=True)


def _checked_keys(config: Mapping[str, str]) -> Iterable[tuple[str, str, str, tuple[str, ...]]]:
    """(key, version text, class or alias, plugin types) of each version key whose class the
    config names."""
    connector_class = config.get("connector.class")
    version = config.get(CONNECTOR_VERSION_KEY)
    if version is not None and connector_class:
        yield CONNECTOR_VERSION_KEY, version, connector_class, _CONNECTOR_TYPES
    for key, value in sorted(config.items()):
        if not key.endswith(_VERSION_SUFFIX) or key == CONNECTOR_VERSION_KEY:
            continue
        prefix = key[: -len(_VERSION_SUFFIX)]
        match = _PLUGIN_KEY.match(prefix)
        if match is None:
            continue
        if match.group(1) is not None:
            class_name = config.get(prefix)
            types: tuple[str, ...] = ("header_converter",) if prefix == "header.converter" else ("converter",)
        else:
            class_name = config.get(f"{prefix}.type")
            types = ("transformation",) if match.group(2) == "transforms" else ("predicate",)
        if class_name:
            yield key, value, class_name.strip(), types


def has_version_keys(config: Mapping[str, str]) -> bool:
    """Whether the config asks for any plugin version (most do not: no listing is needed)."""
    return any(key.endswith(_VERSION_SUFFIX) for key in config)


def _shown(versions: list[str]) -> str:
    """The versions for a message: at most ``MAX_VERSIONS_SHOWN``, each at most 100 characters
    (whoever answers at spec.url writes them)."""
    shown = ", ".join(v if len(v) <= 100 else f"{v[:99]}…" for v in versions[:MAX_VERSIONS_SHOWN])
    more = len(versions) - MAX_VERSIONS_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def check_plugin_versions(
    config: Mapping[str, str],
    installed: Iterable[InstalledPlugin],
    *,
    where: str,
    fields: Mapping[str, str] | None = None,
) -> VersionRefusal | None:
    """The first version key of ``config`` that no installed version of its plugin satisfies,
    or None. ``where``: who answered the listing, for the message (e.g. "the Connect worker of
    ConnectCluster prod"); ``fields``: the spec path of a config key (``connector.plugin.version``
    -> ``spec.version``; other keys default to ``spec.config.<key>``)."""
    plugins = list(installed)
    aliases = _aliases(plugins)
    names = {CONNECTOR_VERSION_KEY: "spec.version", **(fields or {})}
    for key, text, class_or_alias, types in _checked_keys(config):
        field = names.get(key, f"spec.config.{key}")
        try:
            requirement = version_requirement(text)
        except InvalidVersionSpec as error:
            return VersionRefusal(
                INVALID_REASON,
                f"{field} {text!r} is neither a version nor a Maven version range such as [4.0,5.0): {error}; "
                "nothing was created or changed",
            )
        if requirement is None:
            continue
        class_name = aliases.get(class_or_alias, class_or_alias)
        try:
            versions = installed_versions(plugins, class_name, types)
            if not versions or any(requirement.contains(v) for v in versions):
                continue  # installed; or the class is not at all: Connect's own answer names it
        except RecursionError:
            continue  # a version nested thousands of levels deep ("1-1-1-..."): left to Connect
        return VersionRefusal(
            NOT_INSTALLED_REASON,
            f"{field} {text!r} matches no installed version of {class_name}: {where} has {_shown(versions)}. "
            "Nothing was created or changed; set a version the workers have (or a range containing one), "
            "or install that version of the plugin on every worker",
        )
    return None
