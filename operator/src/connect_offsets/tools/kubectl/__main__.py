"""``python -m connect_offsets.tools.kubectl``: the plugin without its console script (krew's shim runs this)."""

import sys

from connect_offsets.tools.kubectl.main import main

if __name__ == "__main__":  # importing the module (tests/unit/test_errors.py walks them all) runs nothing
    sys.exit(main())
