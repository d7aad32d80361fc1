"""``kubectl_complete-connect_offsets``: shell completion of ``kubectl connect-offsets`` through kubectl.

The protocol (kubectl 1.26+, ``k8s.io/kubectl/pkg/cmd/plugin``'s ``pluginCompletion``): for
``kubectl connect-offsets ARG... <TAB>`` kubectl's own completion (``kubectl __complete connect-offsets
ARG... WORD``) runs the executable ``kubectl_complete-connect_offsets`` found on ``PATH`` (the plugin's
name with ``_complete`` inserted before its first ``-``) with the plugin's words, the last being the word
under the cursor ("" for a new one), and with the user's stdin and stderr. It reads stdout: one
candidate a line (cobra's ``candidate<TAB>description`` form), and a last line ``:<directive>`` (cobra's
ShellCompDirective bits: 1 error, 2 no space, 4 no file completion, 8 filter file extensions, 16
directories only, 32 keep order; 0 or no such line: the shell's default, file names).

What is completed: commands, the options of the command (its own and kubectl's connection flags),
the values of options that have a known set (``-o``, ``--kind``, ``--dry-run=``, ``--state``), files
for ``-f``/``--kubeconfig``, contexts from the kubeconfig, and names read from the cluster: the
namespace's KafkaConnectors and KafkaMirrorMaker2s (``NAME``, ``TYPE/NAME``, ``lag``'s either,
``copy``'s FROM and TO, ``--mirror``), namespaces (``-n``), ConnectClusters (``--to-cluster``), a
resource's backups (``--from-backup``) and a KafkaMirrorMaker2's connectors (``--mirrormaker-connector``).

Bounded: the API is asked with the user's kubeconfig, ``--context``, ``--as``/``--as-group``, for
names only (``PartialObjectMetadataList``), at most ``NAME_LIMIT`` per list, without retries, and
within ``API_BUDGET_S`` seconds in all (a server that does not answer leaves the names out). Nothing
but candidates is ever printed: no error, no credential; stderr is silenced (kubectl shows it on the
user's terminal while they type).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from connect_offsets.tools.kubectl.common import (
    CONNECTOR,
    DRY_RUN_STRATEGIES,
    JSONPATH_PREFIX,
    KIND_NAMES,
    MIRROR,
    OUTPUT_FORMATS,
    Kind,
)
from connect_offsets.tools.kubectl.parser import build_parser
from connect_offsets.vocabulary import API_GROUP, API_VERSION, CLUSTERS

# cobra's ShellCompDirective bits
DIRECTIVE_DEFAULT = 0  # let the shell complete file names
DIRECTIVE_NO_SPACE = 2
DIRECTIVE_NO_FILE_COMP = 4

#: How long completion may spend on the API server, in all (kubectl, and the user, wait for it).
API_BUDGET_S = 2.0
#: At most this many names per listing.
NAME_LIMIT = 200
#: Names only: the API server sends each item's metadata, not its spec and status.
PARTIAL_METADATA = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"
#: The options whose value is a file (the shell completes it: directive 0).
FILE_OPTIONS = ("kubeconfig", "from_file")
OUTPUT_HELP = {
    "text": "the result (a table with -l)",
    "wide": "the table (-l, lag) with every column",
    "json": "the result record(s) as JSON",
    "yaml": "the result record(s) as YAML",
    "name": "TYPE.GROUP/NAME of each resource whose request succeeded",
    JSONPATH_PREFIX: "a kubectl JSONPath template on what -o json prints",
}
DRY_RUN_HELP = {
    "none": "make the request",
    "client": "print the writes, send nothing",
    "server": "send the writes with dryRun=All, keep nothing",
    "operator": "the operator's preview of what would change",
}

T = TypeVar("T")


class Names(Protocol):
    """Where the names come from (the cluster, or a test's fake). ``namespace`` None: the context's."""

    def resources(self, kind: Kind, namespace: str | None) -> list[str]: ...

    def namespaces(self) -> list[str]: ...

    def contexts(self) -> list[str]: ...

    def clusters(self, namespace: str | None) -> list[str]: ...

    def backups(self, namespace: str | None, resource: str) -> list[str]: ...

    def mirror_connectors(self, namespace: str | None, mirror: str) -> list[str]: ...


# --- the command line so far ---------------------------------------------------------------------


@dataclass
class Line:
    """The words before the one being completed, read as the plugin's parser would."""

    command: str | None = None
    positionals: list[str] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)  # option dest -> value given
    #: The option whose value the word being completed is (its action), or None.
    pending: argparse.Action | None = None


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _command_help(parser: argparse.ArgumentParser) -> dict[str, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {a.dest: a.help or "" for a in action._choices_actions}
    return {}


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {option: action for action in parser._actions for option in action.option_strings}


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0


def read_line(root: argparse.ArgumentParser, words: Sequence[str]) -> Line:
    line = Line()
    commands = _subparsers(root)
    options = _options(root)
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if line.pending is not None:
            line.values[line.pending.dest] = word
            line.pending = None
            continue
        if word.startswith("-") and len(word) > 1:
            name, equals, value = word.partition("=")
            action = options.get(name)
            if action is None and not name.startswith("--") and len(name) > 2:
                action, value, equals = options.get(name[:2]), name[2:], "="  # -nkafka
            if action is None:
                continue
            if name == "--dry-run":
                if equals:
                    line.values["dry_run"] = value
                elif index < len(words) and words[index] in DRY_RUN_STRATEGIES:
                    line.values["dry_run"] = words[index]
                    index += 1
                else:
                    line.values["dry_run"] = "operator"
                continue
            if not _takes_value(action):
                line.values[action.dest] = "true"
            elif equals:
                line.values[action.dest] = value
            else:
                line.pending = action
            continue
        if line.command is None and word in commands:
            line.command = word
            options = {**options, **_options(commands[word])}
            continue
        line.positionals.append(word)
    return line


# --- candidates ----------------------------------------------------------------------------------


def _matching(candidates: Sequence[str], prefix: str) -> list[str]:
    """Candidates starting with ``prefix``, each once, in order (descriptions after a tab are kept)."""
    seen: set[str] = set()
    found = []
    for candidate in candidates:
        value = candidate.split("\t", 1)[0]
        if value.startswith(prefix) and value not in seen:
            seen.add(value)
            found.append(candidate)
    return found


def _short_help(text: str | None) -> str:
    text = " ".join((text or "").replace("%%", "%").split())
    for stop in ("; ", " (", ": "):
        if stop in text[:90]:
            text = text[: text.index(stop)]
    return text[:80]


def _kind_of(line: Line) -> Kind | None:
    name = line.values.get("kind")
    return KIND_NAMES.get(name.lower()) if name else None


def _named(line: Line) -> tuple[Kind | None, str]:
    """The resource the line names (``NAME`` or ``TYPE/NAME``, and --kind)."""
    text = line.positionals[0]
    if "/" in text:
        prefix, _, name = text.partition("/")
        return KIND_NAMES.get(prefix.lower()), name
    return _kind_of(line) or CONNECTOR, text


def _resource_names(names: Names, line: Line, current: str, kinds: Sequence[Kind]) -> list[str]:
    """``NAME`` or ``TYPE/NAME`` of the given kinds in the line's namespace."""
    namespace = line.values.get("namespace")
    if "/" in current:
        prefix = current.split("/", 1)[0]
        kind = KIND_NAMES.get(prefix.lower())
        return [] if kind is None else [f"{prefix}/{name}" for name in names.resources(kind, namespace)]
    chosen = _kind_of(line)
    if chosen is not None:
        return names.resources(chosen, namespace)
    found = {kind: names.resources(kind, namespace) for kind in kinds}
    if len(kinds) == 1:
        return found[kinds[0]]
    connectors, mirrors = found.get(CONNECTOR, []), found.get(MIRROR, [])
    if line.command == "lag":
        # Either kind by its bare name; a name both kinds have needs its type.
        both = set(connectors) & set(mirrors)
        return [
            *(f"{n}\tKafkaConnector" for n in connectors if n not in both),
            *(f"{n}\tKafkaMirrorMaker2" for n in mirrors if n not in both),
            *(f"cokc/{n}\tKafkaConnector" for n in sorted(both)),
            *(f"mm2/{n}\tKafkaMirrorMaker2" for n in sorted(both)),
        ]
    # A bare NAME is a KafkaConnector; a KafkaMirrorMaker2 is mm2/NAME.
    return [*(f"{n}\tKafkaConnector" for n in connectors), *(f"mm2/{n}\tKafkaMirrorMaker2" for n in mirrors)]


def _dry_run_values(line: Line, prefix: str) -> list[str]:
    allowed = DRY_RUN_STRATEGIES if line.command != "list" else ("none", "client", "server")
    return _matching([f"{s}\t{DRY_RUN_HELP[s]}" for s in allowed], prefix)


def _output_formats(line: Line) -> tuple[str, ...]:
    """``-o``'s values for this line: ``wide`` only where the output is a table (``-l``, ``lag``), as the
    parser takes it (parser.check_wide)."""
    one = line.command in ("copy", "failover-group") or (
        line.command not in (None, "lag") and bool(line.positionals) and line.values.get("selector") is None
    )
    return tuple(f for f in OUTPUT_FORMATS if not (one and f == "wide"))


def _value_candidates(action: argparse.Action, line: Line, names: Names, current: str) -> tuple[list[str], int]:
    """The values of one option (none for one without a known set: no file names either)."""
    dest = action.dest
    namespace = line.values.get("namespace")
    if dest in FILE_OPTIONS:
        return [], DIRECTIVE_DEFAULT
    if dest == "output":
        found = _matching([f"{f}\t{OUTPUT_HELP[f]}" for f in (*_output_formats(line), JSONPATH_PREFIX)], current)
        open_ended = bool(found) and all(c.split("\t", 1)[0].endswith("=") for c in found)
        return found, DIRECTIVE_NO_FILE_COMP | (DIRECTIVE_NO_SPACE if open_ended else 0)
    if dest == "kind":
        kinds = [f"{CONNECTOR.kind.lower()}\tcokc", f"{MIRROR.kind.lower()}\tcomm2, mm2"]
        return _matching(kinds, current), DIRECTIVE_NO_FILE_COMP
    if dest == "dry_run":
        return _dry_run_values(line, current), DIRECTIVE_NO_FILE_COMP
    values: list[str] = []
    if dest in ("namespace", "from_namespace"):
        values = names.namespaces()
    elif dest == "context":
        values = names.contexts()
    elif dest == "mirror":
        values = names.resources(MIRROR, namespace)
    elif dest == "to_cluster":
        values = names.clusters(namespace)
    elif dest == "from_backup" and line.positionals:
        kind, name = _named(line)
        values = names.backups(namespace, name) if kind is not None else []
    elif dest == "mirrormaker_connector" and line.positionals:
        kind, name = _named(line)
        values = names.mirror_connectors(namespace, name) if kind is MIRROR else []
    elif action.choices is not None:
        values = [str(choice) for choice in action.choices]
    return _matching(values, current), DIRECTIVE_NO_FILE_COMP


def suggest(words: Sequence[str], names: Names) -> tuple[list[str], int]:
    """(candidates, directive) for the last of ``words`` (the words after ``connect-offsets``)."""
    *done, current = list(words) or [""]
    root = build_parser()
    line = read_line(root, done)
    commands = _subparsers(root)
    parser = commands.get(line.command or "", root)
    if line.pending is not None:
        return _value_candidates(line.pending, line, names, current)
    if current.startswith("-") and "=" in current:
        name, _, value = current.partition("=")
        action = _options(parser).get(name)
        if action is None or (not _takes_value(action) and name != "--dry-run"):
            return [], DIRECTIVE_NO_FILE_COMP
        return _value_candidates(action, line, names, value)
    if current.startswith("-"):
        flags = [
            f"{option}\t{_short_help(action.help)}"
            for action in parser._actions
            if action.help != argparse.SUPPRESS
            for option in action.option_strings
            if option.startswith("--") or not current.startswith("--")
        ]
        return _matching(flags, current), DIRECTIVE_NO_FILE_COMP
    if line.command is None:
        helps = _command_help(root)
        return _matching([f"{c}\t{_short_help(helps.get(c))}" for c in commands], current), DIRECTIVE_NO_FILE_COMP
    candidates: list[str] = []
    position = len(line.positionals)
    requests = ("list", "alter", "reset", "restore")
    if position == 0 and (line.command == "lag" or (line.command in requests and "selector" not in line.values)):
        candidates = _resource_names(names, line, current, [CONNECTOR, MIRROR])
    elif line.command == "copy" and position in (0, 1):
        candidates = _resource_names(names, line, current, [CONNECTOR])
    if done and done[-1] == "--dry-run" and line.command != "lag":
        # --dry-run STRATEGY, or bare --dry-run and then NAME: either may come here
        candidates = [*_dry_run_values(line, current), *candidates]
    return _matching(candidates, current), DIRECTIVE_NO_FILE_COMP


def render(candidates: Sequence[str], directive: int) -> str:
    """What kubectl reads: one candidate a line, then ``:<directive>``."""
    return "".join(f"{c}\n" for c in candidates) + f":{directive}\n"


# --- names from the cluster ----------------------------------------------------------------------


def _group_path(namespace: str) -> str:
    return f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{namespace}"


class KubeNames:
    """Names read from the API server with the user's kubeconfig: bounded in count and time, and
    every failure (no kubeconfig, no permission, no answer) is no names."""

    def __init__(self, values: dict[str, str], budget_s: float | None = None) -> None:
        self.values = values
        self.deadline = time.monotonic() + (API_BUDGET_S if budget_s is None else budget_s)
        self._api: Any = None
        self._namespace = "default"  # the context's, once loaded
        self._loaded = False

    def _bounded(self, func: Callable[[], T], default: T) -> T:
        """``func()`` in a daemon thread, given what is left of the budget; ``default`` if it fails or
        takes longer (the thread is left behind: it never holds up the exit)."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0.05:
            return default
        box: list[T] = []

        def work() -> None:
            with contextlib.suppress(Exception):  # no names is the answer to every failure
                box.append(func())

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        thread.join(remaining)
        return box[0] if box else default

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        import urllib3

        from connect_offsets.tools.kubectl.api import Connection, load_kube

        connection = Connection(
            kubeconfig=self.values.get("kubeconfig"),
            context=self.values.get("context"),
            request_timeout=max(0.1, self.deadline - time.monotonic()),
            as_user=self.values.get("as_user"),
            as_group=self.values.get("as_group") if self.values.get("as_user") else None,
        )
        kube, self._namespace = load_kube(connection)
        api = kube.core.api_client
        # One attempt per request: the budget is not spent on the client's retries.
        api.rest_client.pool_manager.connection_pool_kw["retries"] = urllib3.util.Retry(
            total=0, redirect=0, raise_on_redirect=False
        )
        self._api = api

    def _get(self, path: str, query: list[tuple[str, str]], accept: str) -> Any:
        """One GET (after loading the kubeconfig): its JSON answer; None for anything but a 2xx."""
        self._load()
        remaining = max(0.1, self.deadline - time.monotonic())
        request = self._api.param_serialize(
            method="GET",
            resource_path=path,
            query_params=query,
            header_params={"Accept": accept},
            auth_settings=["BearerToken"],
        )
        response = self._api.call_api(*request, _request_timeout=(min(1.0, remaining), remaining))
        response.read()
        return json.loads(response.data) if 200 <= response.status < 300 else None

    def _names(self, path: Callable[[str], str], query: list[tuple[str, str]] | None = None) -> list[str]:
        """The names of one listing; ``path`` is given the context's namespace."""

        def fetch() -> list[str]:
            self._load()
            answer = self._get(path(self._namespace), [("limit", str(NAME_LIMIT)), *(query or [])], PARTIAL_METADATA)
            items = (answer or {}).get("items") or []
            found = [str((item.get("metadata") or {}).get("name") or "") for item in items[:NAME_LIMIT]]
            return sorted(name for name in found if name)

        return self._bounded(fetch, [])

    def resources(self, kind: Kind, namespace: str | None) -> list[str]:
        return self._names(lambda default: f"{_group_path(namespace or default)}/{kind.plural}")

    def clusters(self, namespace: str | None) -> list[str]:
        return self._names(lambda default: f"{_group_path(namespace or default)}/{CLUSTERS}")

    def namespaces(self) -> list[str]:
        return self._names(lambda _: "/api/v1/namespaces")

    def backups(self, namespace: str | None, resource: str) -> list[str]:
        from connect_offsets.clients.kubernetes import label_value

        selector = f"{API_GROUP}/backup-of={label_value(resource)}"
        return self._names(
            lambda default: f"/api/v1/namespaces/{namespace or default}/configmaps", [("labelSelector", selector)]
        )

    def mirror_connectors(self, namespace: str | None, mirror: str) -> list[str]:
        def fetch() -> list[str]:
            from connect_offsets.models.crds import KafkaMirrorMaker2Resource
            from connect_offsets.planning import mirror_targets

            self._load()
            path = f"{_group_path(namespace or self._namespace)}/{MIRROR.plural}/{mirror}"
            body = self._get(path, [], "application/json")
            if body is None:
                return []
            resource = KafkaMirrorMaker2Resource.model_validate(body)
            return [target.name for target in mirror_targets(resource, {}).targets]

        return self._bounded(fetch, [])

    def contexts(self) -> list[str]:
        def fetch() -> list[str]:
            from kubernetes import config

            contexts, _ = config.list_kube_config_contexts(config_file=self.values.get("kubeconfig"))  # type: ignore[no-untyped-call]
            return sorted(str(c.get("name")) for c in contexts if c.get("name"))

        return self._bounded(fetch, [])


def complete(words: Sequence[str], names: Names | None = None) -> str:
    """The whole answer for ``words``; never raises (a failure is no candidates)."""
    try:
        *done, _ = list(words) or [""]
        if names is None:
            names = KubeNames(read_line(build_parser(), done).values)
        return render(*suggest(words, names))
    except Exception:
        return render([], DIRECTIVE_NO_FILE_COMP)


def main(argv: Sequence[str] | None = None, *, silence_stderr: bool | None = None) -> int:
    """The console script ``kubectl_complete-connect_offsets``: kubectl passes the plugin's words.

    Also ``kubectl-connect_offsets __complete WORDS`` (cobra's name for it), which the one-file
    build's completion executable runs (``deploy/krew/kubectl_complete-connect_offsets``);
    ``silence_stderr`` defaults to what a process of its own wants (``argv`` from the command line).
    """
    words = sys.argv[1:] if argv is None else list(argv)
    if argv is None if silence_stderr is None else silence_stderr:
        # kubectl shows this program's stderr on the user's terminal while they type: nothing may
        # reach it, not even from a kubeconfig's exec credential plugin.
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (for the life of the process)
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)
    sys.stdout.write(complete(words))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
