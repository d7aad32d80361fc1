"""``python -m connect_offsets.tools.kubectl``: the plugin without its console script (krew's shim runs this)."""

import sys

from connect_offsets.tools.kubectl.main import main

sys.exit(main())
