"""I/O clients: Connect REST, Kubernetes, Kafka (admin calls, consumer groups, MirrorMaker 2 checkpoints).
Only this package talks to the network."""

__all__: list[str] = []
