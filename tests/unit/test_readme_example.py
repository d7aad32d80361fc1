"""The README's first example is a valid ConnectCluster and KafkaConnector, and the ConnectCluster
has ``spec.kafka`` (issue 49 item 5): without it a first sink shows no LAG, only ``NotMeasured``,
and a new user copies the example as it is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from connect_offsets.models.crds import ConnectClusterResource, KafkaConnectorResource

pytestmark = pytest.mark.unit

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_connectcluster_example_has_kafka_access_and_both_resources_are_valid() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(), flags=re.DOTALL)
    first = next(block for block in blocks if "kind: ConnectCluster" in block)
    documents = {doc["kind"]: doc for doc in yaml.safe_load_all(first)}
    cluster = ConnectClusterResource.model_validate(documents["ConnectCluster"])
    assert cluster.spec.kafka is not None and cluster.spec.kafka.bootstrap_servers
    connector = KafkaConnectorResource.model_validate(documents["KafkaConnector"])
    assert connector.metadata.labels["connect-offsets.io/cluster"] == cluster.metadata.name
