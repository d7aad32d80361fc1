"""The offline tool's own room: a Connect worker's offsets store, read and written directly (KIP-199).

Used only by ``connect-offsets export|import`` (``connect_offsets.tools.cli``), never by the operator:
the worker's records byte for byte (``records``), its standalone offsets file (``offsets_file``),
the export and import documents (``documents``), reading and writing its offsets topic or
standalone file (``store``), reading a document file bounded and checking an export's shape
(``export_file``), and the worker's properties file (``worker_config``).
"""
