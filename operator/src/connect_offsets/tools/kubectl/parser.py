"""The command line: commands, options, help texts, and the checks that need no cluster."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from connect_offsets import __version__
from connect_offsets.tools.exit_codes import epilog
from connect_offsets.tools.kubectl.api import Connection
from connect_offsets.tools.kubectl.common import (
    CONNECTOR,
    DRY_RUN_STRATEGIES,
    EXIT_USAGE,
    OUTPUT_FORMATS,
    PLUGIN,
    PluginError,
    parse_duration,
    parse_kind,
    parse_output,
    parse_request_timeout,
    split_name,
)
from connect_offsets.tools.kubectl.request import Options

# --- command line ------------------------------------------------------------------------

EXIT_CODES_TEXT = epilog("kubectl")

EXAMPLES = {
    "list": """\
examples:
  # print a connector's offsets as JSON (also written to spec.listOffsets.toConfigMap)
  kubectl connect-offsets list my-connector -n kafka > offsets.json
  # a MirrorMaker 2 connector
  kubectl connect-offsets list mm2/east-to-west --mirrormaker-connector 'east->west.MirrorSourceConnector'
  # every connector labelled team=payments, summary table
  kubectl connect-offsets list -l team=payments -n kafka
""",
    "alter": """\
examples:
  # apply offsets from a file (validated locally first; the connector must be STOPPED)
  kubectl connect-offsets alter my-connector -n kafka --from-file offsets.json
  # let the operator stop the connector, alter, and resume it
  kubectl connect-offsets alter my-connector --from-file offsets.json --stop-connector
  # show what would change without changing anything (the operator's preview)
  kubectl connect-offsets alter my-connector --from-file offsets.json --dry-run
  # check that the API server (admission, RBAC) takes the writes, without keeping them
  kubectl connect-offsets alter my-connector --from-file offsets.json --dry-run=server
  # apply what is already in spec.alterOffsets.fromConfigMap
  kubectl connect-offsets alter my-connector
""",
    "reset": """\
examples:
  kubectl connect-offsets reset my-connector -n kafka
  kubectl connect-offsets reset my-connector --stop-connector
  # MirrorMaker 2, also clearing the offset-syncs topic
  kubectl connect-offsets reset mm2/east-to-west --mirrormaker-connector 'east->west.MirrorSourceConnector' \\
      --reset-offset-syncs
  # every stopped connector labelled env=staging
  kubectl connect-offsets reset -l env=staging -n kafka
""",
    "restore": """\
examples:
  # put the newest backup back (every alter/reset/restore saves one first)
  kubectl connect-offsets restore my-connector -n kafka
  # a named backup
  kubectl get configmaps -n kafka -l connect-offsets.io/backup-of=my-connector
  kubectl connect-offsets restore my-connector --from-backup my-connector-backup-1a2b3c4d-20261122t005012z-9f3e
""",
}

OVERVIEW_EXAMPLES = """\
examples (each command has more: kubectl connect-offsets COMMAND --help):
  kubectl connect-offsets list my-connector -n kafka > offsets.json
  kubectl connect-offsets alter my-connector -n kafka --from-file offsets.json --stop-connector
  kubectl connect-offsets reset my-connector -n kafka --dry-run
  kubectl connect-offsets restore my-connector -n kafka
  kubectl connect-offsets list mm2/east-to-west --mirrormaker-connector 'east->west.MirrorSourceConnector'
  kubectl connect-offsets reset -l team=payments -n kafka      # many resources, summary table
"""

DESCRIPTIONS = {
    "list": "Write a connector's offsets to its listOffsets ConfigMap and print them as JSON.",
    "alter": "Change a connector's offsets (from a file, or from its alterOffsets ConfigMap).",
    "reset": "Delete all of a connector's offsets.",
    "restore": "Put a backup of a connector's offsets back (the newest, or --from-backup NAME).",
}
DESCRIPTIONS["lag"] = (
    "Show a KafkaConnector's progress (status.progress, the Progressing condition) or a KafkaMirrorMaker2's "
    "replication lag per mirror (status.replicationLag), whichever is named NAME; when both are, say which "
    "(cokc/NAME, mm2/NAME or --kind)."
)
EXAMPLES["lag"] = """\
examples:
  kubectl connect-offsets lag east-to-west -n kafka
  kubectl connect-offsets lag mm2/east-to-west -o json
  kubectl connect-offsets lag cokc/orders-sink -n kafka
  kubectl connect-offsets lag orders-sink -o jsonpath='{.totalLag}'
"""
# `lag` is a read-only view rather than an annotation request: its own function (lag_command),
# not a Runner operation.
DESCRIPTIONS["copy"] = (
    "Copy a KafkaConnector's offsets to another: an existing one (an alter, stop -> change -> resume), or a new "
    "one created from FROM's spec (on this or another ConnectCluster) that starts where FROM is."
)
EXAMPLES["copy"] = """\
examples:
  # rename: orders-v2 is created from orders-v1's spec and starts where orders-v1 (stopped) is
  kubectl connect-offsets copy orders-v1 orders-v2 -n kafka --state running
  # the same connector on another Connect cluster (cluster migration)
  kubectl connect-offsets copy orders orders-west --to-cluster connect-west
  # into an existing connector: preview, then let the operator stop it, copy and resume it
  kubectl connect-offsets copy orders-v1 orders-v2 --dry-run
  kubectl connect-offsets copy orders-v1 orders-v2 --stop-connector
"""
DESCRIPTIONS["failover-group"] = (
    "Fail a consumer group over to a KafkaMirrorMaker2's target cluster: its offsets translated through the "
    "mirror's checkpoints and committed there, while the group has no active members."
)
EXAMPLES["failover-group"] = """\
examples:
  # show the translated offsets first (nothing is committed)
  kubectl connect-offsets failover-group orders-app --mirror b-to-a -n kafka --dry-run
  kubectl connect-offsets failover-group orders-app --mirror b-to-a -n kafka
  # a KafkaMirrorMaker2 with several mirrors: name the source cluster alias
  kubectl connect-offsets failover-group orders-app --mirror dr --source-cluster east
  # the source site is down and some partitions have no checkpoint: commit the rest
  kubectl connect-offsets failover-group orders-app --mirror b-to-a --dry-run --allow-partial
"""
# `copy` and `failover-group` have their own functions too (tools/kubectl/moving.py): a copy may
# create a resource, and a failover is a request on a KafkaMirrorMaker2 that is not a connector's.


def _view_options(parser: argparse.ArgumentParser, *, kinds: bool = True) -> None:
    """Options of every command, ``lag`` included; SUPPRESS so they may stand before or after the command.
    ``kinds``: the command works on either kind (``--kind``); ``copy`` and ``failover-group`` have theirs."""
    s = argparse.SUPPRESS
    parser.add_argument("-n", "--namespace", default=s, help="namespace (default: the kubeconfig context's)")
    if kinds:
        parser.add_argument(
            "--kind",
            default=s,
            help="kafkaconnector (default, short cokc) or kafkamirrormaker2 (comm2, mm2); or write TYPE/NAME",
        )
    parser.add_argument("--kubeconfig", default=s, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", default=s, help="kubeconfig context (default: the current one)")
    parser.add_argument(
        "--request-timeout",
        type=parse_request_timeout,
        default=s,
        metavar="DURATION",
        help="give up on a single API request after this long, e.g. 5s, 1m; 0: no limit (default: 0)",
    )
    parser.add_argument(
        "--as", dest="as_user", default=s, metavar="USER", help="impersonate this user (as kubectl --as)"
    )
    parser.add_argument(
        "--as-group", default=s, metavar="GROUP", help="impersonate this group (once; as kubectl --as-group)"
    )
    parser.add_argument(
        "-o",
        "--output",
        type=parse_output,
        metavar="FORMAT",
        default=s,
        help="output format: "
        + "|".join(OUTPUT_FORMATS)
        + "|jsonpath=TEMPLATE (default: text; wide: the table's every column, with -l and for lag)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", default=s, help="show details of errors")


def _request_options(parser: argparse.ArgumentParser) -> None:
    """Options of the commands that make a request (list, alter, reset, restore), not of ``lag``."""
    s = argparse.SUPPRESS
    parser.add_argument("-A", "--all-namespaces", action="store_true", default=s, help="with -l: every namespace")
    parser.add_argument("-l", "--selector", default=s, help="label selector: run on every matching resource")
    parser.add_argument(
        "--mirrormaker-connector", default=s, metavar="CONNECTOR", help="KafkaMirrorMaker2: which connector"
    )
    parser.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=s,
        help="wait for the operator's result (default: --wait)",
    )
    parser.add_argument(
        "--timeout", type=parse_duration, default=s, help="how long to wait, e.g. 90s, 5m (default: 2m)"
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=s,
        help="while waiting, print the operator's progress to stderr (default: when stderr is a terminal)",
    )


#: The options only request commands take: ``lag`` refuses them when they stand before the command.
#: The commands that take ``-l SELECTOR`` (and then print the result table).
SELECTOR_COMMANDS = ("list", "alter", "reset", "restore")
#: What ``-o text`` prints for one resource, per command (``-o wide``'s refusal names it).
SINGLE_TEXT = {
    "list": "it prints the offsets document",
    "alter": "it prints the operator's message and the undo command; a preview, its report",
    "reset": "it prints the operator's message and the undo command; a preview, its report",
    "restore": "it prints the operator's message and the undo command; a preview, its report",
    "copy": "it prints the operator's message; a dry run, its report or the KafkaConnector it would create",
    "failover-group": "it prints the operator's message; a dry run, the translated offsets",
}
REQUEST_ONLY = ("all_namespaces", "selector", "mirrormaker_connector", "wait", "timeout", "progress")


def _common(parser: argparse.ArgumentParser) -> None:
    _view_options(parser)
    _request_options(parser)


DEFAULTS: dict[str, Any] = {
    "namespace": None,
    "all_namespaces": False,
    "selector": None,
    "kind": None,
    "mirrormaker_connector": None,
    "kubeconfig": None,
    "context": None,
    "request_timeout": 0.0,
    "as_user": None,
    "as_group": None,
    "wait": True,
    "timeout": 120.0,
    "progress": None,
    "output": "text",
    "verbose": False,
    "dry_run": "none",
}

DRY_RUN_HELP = {
    "list": "client: print the request without making it; server: send it with dryRun=All (the API server "
    "checks it, nothing is kept, the operator is not asked). A list changes no offsets: there is no operator "
    "preview of it",
    "changes": "bare, or =operator: the operator reports what would change (printed, and kept in the listOffsets "
    "ConfigMap, key dry-run.json); Connect is only read. alter --from-file: the file goes to ConfigMap "
    "<resource>-dry-run-input, never to the alterOffsets ConfigMap. =client: print the writes without making "
    "them; =server: send them with dryRun=All (admission, RBAC; nothing is kept, the operator is not asked)",
}


def _dry_run_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--dry-run[=STRATEGY]``: ``normalize`` turns ``--dry-run=X`` and ``--dry-run X`` into the
    hidden ``--dry-run-strategy X``; bare ``--dry-run`` is the operator's preview."""
    parser.add_argument(
        "--dry-run",
        dest="dry_run",
        action="store_const",
        const="operator",
        default="none",
        help="[=none|client|server|operator] " + help_text,
    )
    parser.add_argument("--dry-run-strategy", dest="dry_run", default="none", help=argparse.SUPPRESS)


def normalize(argv: Sequence[str]) -> list[str]:
    """The words with kubectl's ``--dry-run=STRATEGY`` (and ``--dry-run STRATEGY``) turned into
    ``--dry-run-strategy STRATEGY``; a bad strategy is a usage error. ``lag``, which changes nothing,
    keeps its words (argparse then refuses --dry-run)."""
    words = list(argv)
    if command_of(words) == "lag":
        return words
    out: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        value: str | None = None
        if word.startswith("--dry-run="):
            value = word.partition("=")[2]
        elif word == "--dry-run" and index + 1 < len(words) and words[index + 1] in DRY_RUN_STRATEGIES:
            value = words[index + 1]
            index += 1
        index += 1
        if value is None:
            out.append(word)
            continue
        if value not in DRY_RUN_STRATEGIES:
            raise PluginError(
                f'invalid --dry-run value {value!r}: must be "none", "client", "server" or "operator" '
                "(bare --dry-run: operator)",
                EXIT_USAGE,
            )
        out += ["--dry-run-strategy", value]
    return out


def command_of(words: Sequence[str]) -> str | None:
    """The command of a command line: its first word that is neither an option nor an option's value."""
    root = build_parser()
    takes_value = {o for a in root._actions if a.nargs != 0 for o in a.option_strings}
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word in takes_value:
            index += 1
        elif not word.startswith("-"):
            return word
    return None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line as argparse reads it, after ``normalize``."""
    return build_parser().parse_args(normalize(sys.argv[1:] if argv is None else argv))


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32, width=110)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PLUGIN,
        formatter_class=_Formatter,
        description="List, alter, reset and restore Kafka Connect offsets through the connect-offsets operator:\n"
        "the plugin writes the ConfigMap and annotations, waits for the operator and prints the result.",
        epilog=OVERVIEW_EXAMPLES + "\n" + EXIT_CODES_TEXT,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _common(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in ("list", "alter", "reset", "restore"):
        cmd = sub.add_parser(
            command,
            help=DESCRIPTIONS[command],
            description=DESCRIPTIONS[command],
            epilog=EXAMPLES[command] + "\n" + EXIT_CODES_TEXT,
            formatter_class=_Formatter,
        )
        cmd.add_argument("name", nargs="?", metavar="NAME", help="resource name, or TYPE/NAME (cokc/x, mm2/x)")
        _common(cmd)
        if command == "alter":
            cmd.add_argument("-f", "--from-file", metavar="FILE", help='offsets JSON ({"offsets": [...]}); - is stdin')
        if command in ("alter", "reset", "restore"):
            cmd.add_argument(
                "--stop-connector",
                action="store_true",
                help="let the operator stop a running connector first and resume it afterwards",
            )
        _dry_run_option(cmd, DRY_RUN_HELP["list" if command == "list" else "changes"])
        if command == "restore":
            cmd.add_argument("--from-backup", metavar="CONFIGMAP", help="the backup to restore (default: the newest)")
        if command == "reset":
            cmd.add_argument(
                "--reset-offset-syncs",
                action="store_true",
                help="MirrorSourceConnector: also delete the mm2-offset-syncs topic",
            )
    lag = sub.add_parser(
        "lag",
        help=DESCRIPTIONS["lag"],
        description=DESCRIPTIONS["lag"],
        epilog=EXAMPLES["lag"],
        formatter_class=_Formatter,
    )
    lag.add_argument(
        "name",
        metavar="NAME",
        help="a KafkaConnector or KafkaMirrorMaker2 name (whichever exists), or TYPE/NAME (cokc/x, mm2/x)",
    )
    _view_options(lag)
    copy = sub.add_parser(
        "copy",
        help=DESCRIPTIONS["copy"],
        description=DESCRIPTIONS["copy"],
        epilog=EXAMPLES["copy"] + "\n" + EXIT_CODES_TEXT,
        formatter_class=_Formatter,
    )
    copy.add_argument("source", metavar="FROM", help="the KafkaConnector whose offsets are copied")
    copy.add_argument("destination", metavar="TO", help="the KafkaConnector that gets them (created if absent)")
    copy.add_argument(
        "--to-cluster",
        metavar="[NS/]CLUSTER",
        help="a new TO: the ConnectCluster it runs on (default: FROM's)",
    )
    copy.add_argument("--from-namespace", metavar="NS", help="FROM's namespace (default: -n's)")
    copy.add_argument(
        "--state",
        choices=("running", "paused", "stopped"),
        help="a new TO: its spec.state once its offsets are in (default: FROM's)",
    )
    copy.add_argument(
        "--stop-connector",
        action="store_true",
        help="an existing TO: let the operator stop it first and resume it afterwards",
    )
    _dry_run_option(
        copy,
        "an existing TO: as alter's (the operator's preview lists what would change and which of FROM's "
        "partitions will not match it). A new TO: bare or =client prints the KafkaConnector that would be created, "
        "=server sends its creation with dryRun=All",
    )
    _view_options(copy, kinds=False)
    _wait_options(copy)
    failover = sub.add_parser(
        "failover-group",
        help=DESCRIPTIONS["failover-group"],
        description=DESCRIPTIONS["failover-group"],
        epilog=EXAMPLES["failover-group"] + "\n" + EXIT_CODES_TEXT,
        formatter_class=_Formatter,
    )
    failover.add_argument("group", metavar="GROUP", help="the consumer group (its id on the source cluster)")
    failover.add_argument("--mirror", required=True, metavar="NAME", help="the KafkaMirrorMaker2 (mm2/NAME works too)")
    failover.add_argument(
        "--source-cluster", metavar="ALIAS", help="the mirror's source cluster alias (when several have checkpoints)"
    )
    failover.add_argument(
        "--allow-partial",
        action="store_true",
        help="commit the partitions that translate even when others cannot (those start from the group's "
        "auto.offset.reset); without it such a failover is refused, each partition listed with its reason",
    )
    _dry_run_option(
        failover,
        "bare or =operator: print the translated offsets (kept in a ConfigMap of the KafkaMirrorMaker2), commit "
        "nothing; =client: print the request without making it; =server: send it with dryRun=All",
    )
    _view_options(failover, kinds=False)
    _wait_options(failover)
    return parser


def _wait_options(parser: argparse.ArgumentParser) -> None:
    """The wait of ``copy`` and ``failover-group`` (as the request commands')."""
    s = argparse.SUPPRESS
    parser.add_argument(
        "--wait", action=argparse.BooleanOptionalAction, default=s, help="wait for the operator's result (default)"
    )
    parser.add_argument(
        "--timeout", type=parse_duration, default=s, help="how long to wait, e.g. 90s, 5m (default: 2m)"
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=s,
        help="while waiting, print the operator's progress to stderr (default: when stderr is a terminal)",
    )


def connection(values: dict[str, Any]) -> Connection:
    """kubectl's global flags, from parsed values (with DEFAULTS)."""
    if values["as_group"] is not None and values["as_user"] is None:
        raise PluginError("--as-group needs --as USER (as in kubectl)", EXIT_USAGE)
    return Connection(
        kubeconfig=values["kubeconfig"],
        context=values["context"],
        request_timeout=values["request_timeout"],
        as_user=values["as_user"],
        as_group=values["as_group"],
    )


def check_wide(command: str, output: str, selector: str | None) -> None:
    """``-o wide`` widens the table ``-o text`` prints, as in kubectl, so only where there is one.

    A request command's text on many resources (``-l``) is the result table, which ``wide`` widens;
    on one resource its text is the result itself - ``list``'s offsets document (``list NAME >
    offsets.json``), a preview's report, a change's message and undo command - which has no columns
    to add, so ``-o wide`` there is refused (kubectl refuses ``wide`` where it prints no table, e.g.
    ``kubectl apply -o wide``) rather than printing another kind of output. ``lag`` prints a table
    and takes ``wide`` always (lag.py).
    """
    if output == "wide" and selector is None:
        printed = SINGLE_TEXT.get(command, "the result itself")
        raise PluginError(
            f"-o wide widens a table, and {command} on one resource prints none ({printed}); -o json or -o yaml "
            "print the whole result record (reason, backup, request id)"
            + (
                "; with -l SELECTOR it prints the result table, which -o wide widens"
                if command in SELECTOR_COMMANDS
                else ""
            ),
            EXIT_USAGE,
        )


def parse_options(argv: Sequence[str] | None) -> tuple[Options, Connection]:
    """Parse and check the command line; returns the options and how to reach the API server."""
    args = parse_args(argv)
    values = {**DEFAULTS, **vars(args)}
    check_wide(args.command, values["output"], values["selector"])
    if values["selector"] is None and not values["name"]:
        raise PluginError(
            f"{args.command}: give a resource NAME or -l SELECTOR ({PLUGIN} {args.command} -h)", EXIT_USAGE
        )
    if values["selector"] is not None and values["name"]:
        raise PluginError(f"{args.command}: give either NAME or -l SELECTOR, not both", EXIT_USAGE)
    if values["all_namespaces"] and values["selector"] is None:
        raise PluginError("-A/--all-namespaces needs -l SELECTOR", EXIT_USAGE)
    if values["all_namespaces"] and values["namespace"] is not None:
        raise PluginError("give either -n NAMESPACE or -A, not both", EXIT_USAGE)
    if values["name"]:
        kind, name = split_name(values["name"], values["kind"])
        names = [name]
    else:
        kind, names = parse_kind(values["kind"]) if values["kind"] else CONNECTOR, []
    if kind.is_mirror and values["mirrormaker_connector"] is None:
        raise PluginError(
            "KafkaMirrorMaker2 offsets need --mirrormaker-connector CONNECTOR (e.g. 'east->west.MirrorSourceConnector'"
            "; kubectl get comm2 NAME -o jsonpath='{.status.connectors[*].name}' lists them)",
            EXIT_USAGE,
        )
    if not kind.is_mirror and values["mirrormaker_connector"] is not None:
        raise PluginError("--mirrormaker-connector only applies to KafkaMirrorMaker2 (use mm2/NAME)", EXIT_USAGE)
    strategy = values["dry_run"]
    if strategy == "operator" and values.get("stop_connector"):
        raise PluginError("--dry-run changes nothing, so --stop-connector has no effect with it; drop one", EXIT_USAGE)
    if strategy == "operator" and args.command == "list":
        raise PluginError(
            "list changes no offsets, so there is nothing for the operator to preview; --dry-run=client or "
            "--dry-run=server show the request without making it",
            EXIT_USAGE,
        )
    offsets_text, source = None, ""
    if values.get("from_file"):
        offsets_text, source = _read_file(values["from_file"])
    options = Options(
        operation=args.command,
        kind=kind,
        names=names,
        namespace=values["namespace"],
        selector=values["selector"],
        mirror_connector=values["mirrormaker_connector"],
        wait=values["wait"],
        timeout=values["timeout"],
        output=values["output"],
        verbose=values["verbose"],
        dry_run=strategy == "operator",
        stop_connector=bool(values.get("stop_connector")),
        from_backup=values.get("from_backup"),
        offsets_text=offsets_text,
        offsets_source=source,
        reset_offset_syncs=bool(values.get("reset_offset_syncs")),
        all_namespaces=values["all_namespaces"],
        progress=sys.stderr.isatty() if values["progress"] is None else values["progress"],
        request_timeout=values["request_timeout"],
        dry_run_strategy=strategy if strategy in ("client", "server") else "none",
    )
    return options, connection(values)


def _read_file(path: str) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), "file <stdin>"
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(), f"file {path}"
    except OSError as error:
        raise PluginError(f"--from-file {path}: {error.strerror or error}", EXIT_USAGE) from error
    except UnicodeDecodeError as error:
        raise PluginError(
            f"--from-file {path}: not UTF-8 text ({error.reason} at byte {error.start})", EXIT_USAGE
        ) from error
