"""pydantic models: our CRDs, Connect documents, offsets documents; no I/O."""

__all__: list[str] = []
