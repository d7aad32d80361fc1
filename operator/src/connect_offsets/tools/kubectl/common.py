"""What every part of the plugin shares: exit codes, the error type, resource kinds, durations."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Final

from connect_offsets.errors import ConnectOffsetsError
from connect_offsets.tools.exit_codes import ExitCode
from connect_offsets.tools.kubectl.jsonpath import JsonPathError, compile_template
from connect_offsets.vocabulary import API_GROUP, CONNECTORS, MIRRORS

# The plugin's names for the codes of tools/exit_codes.py (the one definition, shared with connect-offsets).
EXIT_OK: Final = int(ExitCode.OK)
EXIT_FAILED: Final = int(ExitCode.FAILED)
EXIT_USAGE: Final = int(ExitCode.INVALID)
EXIT_TIMEOUT: Final = int(ExitCode.TIMEOUT)
EXIT_KUBE: Final = int(ExitCode.KUBERNETES)
EXIT_INTERRUPTED: Final = int(ExitCode.INTERRUPTED)

#: How often the plugin reads the resource while it waits, when it cannot watch it.
POLL_INTERVAL_S = 0.5
#: With -l, how many resources are worked on at once (each holds one watch while it waits).
MAX_PARALLEL = 8
PLUGIN = "kubectl connect-offsets"
#: ``-o`` choices of every command (see render.py), besides ``jsonpath=TEMPLATE``.
OUTPUT_FORMATS = ("text", "wide", "json", "yaml", "name")
#: ``-o jsonpath=TEMPLATE`` (kubectl's JSONPath, on what ``-o json`` prints).
JSONPATH_PREFIX = "jsonpath="

#: ``--dry-run=STRATEGY``: kubectl's three (``none``; ``client``: nothing is sent; ``server``: every
#: write is sent with ``dryRun=All``, so the API server checks it and keeps nothing), and the
#: operator's preview (``operator``, also bare ``--dry-run``: the request is made with the
#: ``dry-run`` annotation and the operator reports what would change in Connect).
DRY_RUN_STRATEGIES = ("none", "client", "server", "operator")


def parse_output(text: str) -> str:
    """``-o``: one of OUTPUT_FORMATS, or ``jsonpath=TEMPLATE`` (also ``jsonpath={...}`` quoted by the shell)."""
    if text in OUTPUT_FORMATS:
        return text
    if text.startswith(JSONPATH_PREFIX):
        if not text[len(JSONPATH_PREFIX) :].strip():
            raise argparse.ArgumentTypeError("jsonpath needs a template, e.g. -o jsonpath='{.result}'")
        try:
            compile_template(text[len(JSONPATH_PREFIX) :])
        except JsonPathError as error:
            raise argparse.ArgumentTypeError(f"jsonpath template: {error}") from None
        return text
    if text == "jsonpath":
        raise argparse.ArgumentTypeError("jsonpath needs a template, e.g. -o jsonpath='{.result}'")
    choices = ", ".join([*OUTPUT_FORMATS, JSONPATH_PREFIX + "TEMPLATE"])
    raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {choices})")


class PluginError(ConnectOffsetsError):
    """An error for the user: one line of ``message``; ``detail`` is shown with --verbose."""

    def __init__(self, message: str, code: int, detail: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.detail = detail


class Refused(PluginError):
    """The plugin refuses the operation itself, before writing anything, for the reason the operator
    would give (e.g. ``ConnectorNotStopped``): exit 1 and that reason, as if the operator had answered,
    but nothing was written and no request was made."""

    def __init__(self, message: str, reason: str, hint: str = "") -> None:
        super().__init__(message, EXIT_FAILED)
        self.reason = reason
        self.hint = hint


# --- resource kinds ----------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    kind: str
    plural: str
    short: str

    @property
    def is_mirror(self) -> bool:
        return self.kind == "KafkaMirrorMaker2"

    @property
    def kubectl_type(self) -> str:
        """Unambiguous for kubectl even when Strimzi's CRDs are installed too."""
        return f"{self.plural}.{API_GROUP}"


CONNECTOR = Kind("KafkaConnector", CONNECTORS, "cokc")
MIRROR = Kind("KafkaMirrorMaker2", MIRRORS, "comm2")
KIND_NAMES = {
    name: kind
    for kind in (CONNECTOR, MIRROR)
    for name in (kind.kind.lower(), kind.plural, kind.short, kind.kubectl_type, kind.plural[:-1] + f".{API_GROUP}")
}
KIND_NAMES["mm2"] = MIRROR
KIND_NAMES["kmm2"] = MIRROR


def parse_kind(text: str) -> Kind:
    try:
        return KIND_NAMES[text.lower()]
    except KeyError:
        raise PluginError(
            f"unknown resource type {text!r}: use kafkaconnector (cokc) or kafkamirrormaker2 (comm2, mm2)", EXIT_USAGE
        ) from None


def split_name(text: str, kind_option: str | None) -> tuple[Kind, str]:
    """``NAME`` or ``TYPE/NAME`` (``cokc/x``, ``mm2/x``), reconciled with ``--kind``."""
    kind = parse_kind(kind_option) if kind_option else None
    if "/" in text:
        prefix, _, name = text.partition("/")
        named = parse_kind(prefix)
        if kind is not None and kind != named:
            raise PluginError(f"{text!r} names a {named.kind} but --kind says {kind.kind}", EXIT_USAGE)
        kind = named
    else:
        name = text
    if not name:
        raise PluginError(f"{text!r}: the resource name is empty", EXIT_USAGE)
    return kind or CONNECTOR, name


# --- durations ---------------------------------------------------------------------------

_DURATION = re.compile(r"(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+(?:\.\d+)?)s?)?")


def parse_duration(text: str) -> float:
    """kubectl-style durations: ``90``, ``90s``, ``2m``, ``1m30s``, ``1h``; at least 1 s."""
    match = _DURATION.fullmatch(text.strip())
    if not text.strip() or match is None or not any(match.groups()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (examples: 90s, 2m, 1m30s)")
    seconds = int(match["h"] or 0) * 3600 + int(match["m"] or 0) * 60 + float(match["s"] or 0)
    if seconds < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: the timeout must be at least 1s")
    return seconds


def parse_request_timeout(text: str) -> float:
    """kubectl's ``--request-timeout``: ``0`` (the default) waits without limit, else a duration
    (``500ms`` is not supported: whole or decimal seconds, minutes, hours)."""
    if text.strip() in ("0", "0s"):
        return 0.0
    match = _DURATION.fullmatch(text.strip())
    if not text.strip() or match is None or not any(match.groups()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (examples: 0, 5s, 1m)")
    seconds = int(match["h"] or 0) * 3600 + int(match["m"] or 0) * 60 + float(match["s"] or 0)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 for no timeout, or a positive duration")
    return seconds


def format_duration(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest}s" if minutes and rest else f"{minutes}m" if minutes else f"{rest}s"
