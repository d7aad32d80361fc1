"""The kubectl plugin's former single module, kept so that console scripts installed before the split
into ``tools/kubectl/`` (``connect_offsets.tools.kubectl_plugin:main``) keep working.

New code imports ``connect_offsets.tools.kubectl``.
"""

from connect_offsets.tools.kubectl import main

__all__ = ["main"]
