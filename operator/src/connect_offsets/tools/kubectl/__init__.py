"""``kubectl connect-offsets``: offsets operations as one command that waits for the answer.

Why a plugin: with the operator alone, an offsets change is several steps (write a ConfigMap,
annotate, poll the status, read the ConfigMap back) and a mistake surfaces only in a condition.
The plugin performs exactly those steps — it never talks to Connect and never does anything a user
could not do with ``kubectl`` — but validates the input locally first (with the operator's own
models and planner, so the two can never disagree), waits until the operator has recorded the
result, prints it, and exits with a code scripts can use. ``-l SELECTOR`` runs one operation on
many resources and prints a summary table.

How completion is detected (see ``completion.classify``): the operator writes ``lastOffsetsOperation``
(the resource's, or ``status.connectors[]``'s for MirrorMaker 2) and only *then* removes the
request annotation on success; a failure keeps the annotation and records ``result: Failed`` with
Connect's message. A record counts as this request's answer when it names this request's id, or
(operators without request ids) when it changed since the request was made or carries this
request's fingerprint (``planning.offsets_request_fingerprint``). After a failure the plugin
withdraws the annotations it set, so that nothing runs later by surprise. The wait is a watch on
the resource from the resourceVersion of the annotation patch (``api.ResourceWatch``), each change
classified as it arrives and its progress (``completion.progress_text``) printed on stderr.

Exit codes (tools/exit_codes.py, shared with ``connect-offsets``): 0 success, 1 the operation
failed, 2 usage or validation error (nothing was changed), 3 timed out waiting for the operator
(the request stays pending), 4 the Kubernetes API could not be used (kubeconfig, connection,
permissions). With ``-l``, the highest code of all resources.

Installed as the console script ``kubectl-connect_offsets`` (``main.main``), which kubectl runs
for ``kubectl connect-offsets``, and ``kubectl_complete-connect_offsets`` (``shell_completion.main``),
which kubectl 1.26+ runs to complete ``kubectl connect-offsets ... <TAB>``. Never imports kopf,
``reconcile``, ``handlers`` or ``lag`` (import-linter contracts).

As kubectl users expect: ``--dry-run=client`` writes nothing, ``--dry-run=server`` sends every write
with ``dryRun=All`` (``api.Writes``; bare ``--dry-run`` is the operator's preview); ``-o`` has one
meaning per command (``render``; ``jsonpath=`` is kubectl's template syntax, ``jsonpath``); every
check is made before the first write, a change the operator would refuse because the connector is
not STOPPED included (``request.check_stopped``).

The rooms, top to bottom (an import-linter layers contract): ``main`` (the entry point), ``lag``
(the read-only ``lag`` command) and ``moving`` (``copy``, ``failover-group``), ``runner`` (annotate
and wait, per resource), ``parser`` (the command line) and ``render`` (what is printed), ``api``
(kubeconfig, connection flags, the watch, the writes and their dry runs, API errors), ``completion``
(has the operator answered? how far is it?), ``request`` (the request and its local checks),
``common``. Beside them: ``shell_completion`` (the completion executable: the parser's commands and
options, names from the API) and ``jsonpath`` (pure, used by ``common`` and ``render``).
"""

from connect_offsets.tools.kubectl.api import Connection, Writes, connection_cause, kube_error, load_kube
from connect_offsets.tools.kubectl.common import (
    CONNECTOR,
    DRY_RUN_STRATEGIES,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_KUBE,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    MIRROR,
    PLUGIN,
    Kind,
    PluginError,
    Refused,
    parse_duration,
    parse_kind,
    parse_output,
    split_name,
)
from connect_offsets.tools.kubectl.completion import (
    RequestOutcome,
    Waiting,
    classify,
    last_operation,
    own_backup,
    progress_text,
)
from connect_offsets.tools.kubectl.lag import lag_command, render_connector_lag, render_lag
from connect_offsets.tools.kubectl.main import main
from connect_offsets.tools.kubectl.moving import copied_manifest, copy_command, created_state, failover_command
from connect_offsets.tools.kubectl.parser import build_parser, parse_options
from connect_offsets.tools.kubectl.render import WaitProgress, render_single, render_table, report
from connect_offsets.tools.kubectl.request import (
    Options,
    Request,
    Resolved,
    check_request,
    check_stopped,
    dry_run_input_name,
    existing_request,
    new_request_id,
    resolve,
    validate_offsets,
)
from connect_offsets.tools.kubectl.runner import Runner, run
from connect_offsets.vocabulary import dry_run_key

__all__ = [
    "CONNECTOR",
    "DRY_RUN_STRATEGIES",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_KUBE",
    "EXIT_OK",
    "EXIT_TIMEOUT",
    "EXIT_USAGE",
    "MIRROR",
    "PLUGIN",
    "Connection",
    "Kind",
    "Options",
    "PluginError",
    "Refused",
    "Request",
    "RequestOutcome",
    "Resolved",
    "Runner",
    "WaitProgress",
    "Waiting",
    "Writes",
    "build_parser",
    "check_request",
    "check_stopped",
    "classify",
    "connection_cause",
    "copied_manifest",
    "copy_command",
    "created_state",
    "dry_run_input_name",
    "dry_run_key",
    "existing_request",
    "failover_command",
    "kube_error",
    "lag_command",
    "last_operation",
    "load_kube",
    "main",
    "new_request_id",
    "own_backup",
    "parse_duration",
    "parse_kind",
    "parse_options",
    "parse_output",
    "progress_text",
    "render_connector_lag",
    "render_lag",
    "render_single",
    "render_table",
    "report",
    "resolve",
    "run",
    "split_name",
    "validate_offsets",
]
