"""The three products that are not the operator: the ``connect-offsets`` CLI (``cli``, with the
offline offsets store in ``offline/`` and the PySpark ``pipeline/``) and the kubectl plugin
(``kubectl/``).

Why one folder: they share the models, the offsets documents and the clients with the operator,
but never its reconcile layer or kopf handlers (an import-linter contract), and a newcomer looking
for "the CLI" or "the plugin" should find them side by side, apart from the controller.
"""
