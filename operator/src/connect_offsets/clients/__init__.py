"""I/O clients: Connect REST, Kubernetes. Only this package talks to the network."""

__all__: list[str] = []
