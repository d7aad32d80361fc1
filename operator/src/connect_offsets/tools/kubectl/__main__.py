"""``python -m connect_offsets.tools.kubectl``, and the entry of the one-file build (hack/build_plugin.py)."""

import sys

from connect_offsets.tools.kubectl.main import main

if __name__ == "__main__":  # importing the module (tests/unit/test_errors.py walks them all) runs nothing
    sys.exit(main())
