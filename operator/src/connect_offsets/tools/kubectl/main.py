"""The entry point of the console script ``kubectl-connect_offsets`` and of the one-file build (make plugin)."""

from __future__ import annotations

import asyncio
import sys
import traceback
from collections.abc import Sequence

from connect_offsets.tools.kubectl import shell_completion
from connect_offsets.tools.kubectl.api import load_kube
from connect_offsets.tools.kubectl.common import EXIT_FAILED, EXIT_INTERRUPTED, PluginError
from connect_offsets.tools.kubectl.lag import lag_command
from connect_offsets.tools.kubectl.moving import copy_command, failover_command
from connect_offsets.tools.kubectl.parser import build_parser, normalize, parse_options
from connect_offsets.tools.kubectl.render import report
from connect_offsets.tools.kubectl.runner import run

#: ``kubectl-connect_offsets __complete WORDS`` answers as ``kubectl_complete-connect_offsets WORDS``
#: (no resource name can be ``__complete``: Kubernetes names have no ``_``).
COMPLETE = "__complete"


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] == [COMPLETE]:  # cobra's hidden command: what the completion executable runs
        return shell_completion.main(words[1:], silence_stderr=argv is None)
    verbose = "-v" in words or "--verbose" in words
    try:
        own = {"lag": lag_command, "copy": copy_command, "failover-group": failover_command}
        if own.keys() & set(words):
            command = build_parser().parse_known_args(normalize(words))[0].command
            if command in own:
                return own[command](words)
        options, connection = parse_options(words)
        kube, default_namespace = load_kube(connection)
        namespace = None if options.all_namespaces else options.namespace or default_namespace
        try:
            outcomes = asyncio.run(run(options, kube, namespace))
        finally:
            kube.core.api_client.close()
    except PluginError as error:
        print(f"error: {error}", file=sys.stderr)
        if verbose and error.detail:
            print(f"detail:\n{error.detail}", file=sys.stderr)
        return error.code
    except KeyboardInterrupt:
        print("interrupted; a request already made stays pending (see the resource's annotations)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:  # a bug or an unforeseen failure: one line, the trace with --verbose
        print(f"error: unexpected {type(error).__name__}: {error}", file=sys.stderr)
        if verbose:
            traceback.print_exc()
        return EXIT_FAILED
    return report(outcomes, options)


if __name__ == "__main__":
    sys.exit(main())
