"""``python -m connect_offsets.tools.pipeline`` and ``spark-submit <path>/pipeline/__main__.py``.

Why both: embedded runs start their own local Spark; spark-submit (a Spark cluster, Spark on
Kubernetes) starts the JVM first and runs this file as the driver script, so it must work when run
by path as well as as a module.
"""

from __future__ import annotations

import sys

from connect_offsets.tools.pipeline.command import main

if __name__ == "__main__":
    sys.exit(main())
