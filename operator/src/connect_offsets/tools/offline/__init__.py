"""The offline tool's own room: a Connect worker's offsets store, read and written directly (KIP-199).

Used only by ``connect-offsets export|import`` (``connect_offsets.tools.cli``), never by the operator:
the worker's store formats byte for byte (``records``), reading and writing its offsets topic or
standalone file (``store``), and the worker's properties file (``worker_config``).
"""
