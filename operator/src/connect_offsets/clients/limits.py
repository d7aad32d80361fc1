"""How much of what others send the operator reads: the caps on documents and Connect's answers.

Why one module: a tenant controls two things the operator reads whole, the ConfigMaps its offsets
requests name and the server behind its ConnectCluster's ``spec.url``. Both may be compressed, so a
few hundred kilobytes can inflate to gigabytes in an operator every tenant shares. Every read of
either stops at one of these caps, counted in *decoded* bytes as they arrive, before anything is
parsed.
"""

from __future__ import annotations

import logging
import os
from typing import Final

__all__ = ["DEFAULT_MAX_DOCUMENT_BYTES", "MAX_SMALL_RESPONSE_BYTES", "max_document_bytes"]

log = logging.getLogger(__name__)

#: An offsets document (a ConfigMap's, a backup's, Connect's ``GET .../offsets``) larger than this
#: is refused. 1,000,000 partitions of a typical source connector are 116 MiB, the scale the
#: chart's default memory is sized for; CONNECT_OFFSETS_MAX_DOCUMENT_BYTES (chart value
#: ``maxDocumentBytes``) changes it.
DEFAULT_MAX_DOCUMENT_BYTES: Final = 256 * 1024 * 1024
#: Every other answer from Connect (``GET /``, status, config, topics, plugins, PATCH messages,
#: error bodies). A status with 100 failing tasks and their traces stays far below it.
MAX_SMALL_RESPONSE_BYTES: Final = 4 * 1024 * 1024


def max_document_bytes() -> int:
    """CONNECT_OFFSETS_MAX_DOCUMENT_BYTES, or the default; read once per use so tests can set it."""
    raw = os.environ.get("CONNECT_OFFSETS_MAX_DOCUMENT_BYTES", "")
    if not raw:
        return DEFAULT_MAX_DOCUMENT_BYTES
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    log.warning(
        "CONNECT_OFFSETS_MAX_DOCUMENT_BYTES=%r is not a positive integer; using %d", raw, DEFAULT_MAX_DOCUMENT_BYTES
    )
    return DEFAULT_MAX_DOCUMENT_BYTES
