"""Config provider references by allow-list, on a real worker that has the providers (issue 43).

The operator runs as the chart installs it (``chart_operator``: its ServiceAccount token and RBAC)
for two tenant namespaces. The Connect worker is a dedicated one with three config providers, as a
platform's workers have them: Kafka's ``FileConfigProvider`` (``file``), ``EnvVarConfigProvider``
(``env``) and a ``DirectoryConfigProvider`` (``mounted``) over one directory per namespace, the
way mounted Secrets look. So a reference that got through would be resolved, and the one allowed
is: its connector writes to the topic the provider's file names.

* Tenant A's ConnectCluster allows ``mounted`` under ``<dir>/{namespace}/``. Refused, with nothing
  sent to Connect (the worker's request log has no request for them, and ``POST /connectors`` only
  for the connectors allowed): a second reference to another namespace's directory behind a first
  one (``${nope:x:y}${mounted:…}``), the issue's own value (``${nope:x}${mounted:…}``), the workers'
  own file (``${file:…worker.properties:…}``), their environment (``${env:…}``), a ``..`` path; a
  KafkaMirrorMaker2 whose connector config refers to ``file``, and one whose secretConfig Secret
  holds an ``env`` reference (refused without quoting the Secret). Accepted: the reference to its
  own directory (resolved by the worker: the records reach the topic named in the file), and
  ``price ${USD}``, which is no reference.
* Tenant B's ConnectCluster has no ``configProviders`` (an install from before the upgrade): even
  its own directory is refused. Tenant B's second ConnectCluster for the same worker allows itself
  every provider, but the chart's ``configProviders.clusterNamespaces`` names only tenant A's
  namespace: not honoured, refused.
"""

from __future__ import annotations

import base64
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import wait_for
from tests.integration.chart_install import chart_operator, tenant_namespaces
from tests.integration.connect_worker import DedicatedWorker
from tests.integration.support import (
    GROUP,
    connector_config,
    create_cluster,
    create_connector,
    create_mm2,
    end_offset,
    file_source_spec,
    request_lines,
    wait_condition,
    wait_mm2_condition,
)

PROVIDERS = (
    "config.providers=file,env,mounted",
    "config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider",
    "config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider",
    "config.providers.mounted.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider",
)


def mounted(directory: Path, namespace: str, secret: str, key: str, value: str) -> None:
    """One key of one Secret, as a Secret volume mounts it: ``<dir>/<namespace>/<secret>/<key>``."""
    folder = directory / namespace / secret
    folder.mkdir(parents=True, exist_ok=True)
    (folder / key).write_text(value)


def refused(custom: Any, namespace: str, name: str) -> str:
    said = wait_condition(custom, namespace, name, "Ready", "False", reason="ConfigProviderReference", timeout=90)
    message: str = said["message"]
    assert "nothing was sent to Connect" in message, said
    return message


@pytest.mark.local_stack
@pytest.mark.timeout(600)
def test_references_outside_the_allow_list_never_reach_connect(
    custom: Any, core: Any, namespace: str, stack: dict[str, Any], tmp_path: Path, unique: str
) -> None:
    directory = tmp_path / "mounted"
    worker = DedicatedWorker(name=f"refs{unique[:6]}", extra_props=PROVIDERS)
    worker.start()
    source = tmp_path / "in.txt"
    source.write_text("".join(f"line {i}\n" for i in range(5)))
    resolved_topic = f"resolved-{unique}"
    try:
        with (
            tenant_namespaces(core, custom, namespace) as (tenant_a, tenant_b),
            chart_operator(
                stack,
                core,
                custom,
                tmp_path,
                [tenant_a, tenant_b],
                values=["configProviders.clusterNamespaces={" + tenant_a + "}"],
            ),
        ):
            for tenant in (tenant_a, tenant_b):
                mounted(directory, tenant, "app", "topic", resolved_topic if tenant == tenant_a else f"b-{unique}")
            allowed = {"allowed": [{"name": "mounted", "pathPrefix": f"{directory}/{{namespace}}/"}]}
            create_cluster(custom, tenant_a, worker.url, configProviders=allowed)
            create_cluster(custom, tenant_b, worker.url)
            # Tenant B's own ConnectCluster for the same worker, allowing itself every provider: its
            # namespace is not one the platform named, so the list is not honoured.
            everything = {"allowed": [{"name": "mounted"}, {"name": "file"}, {"name": "env"}]}
            create_cluster(custom, tenant_b, worker.url, name="own", configProviders=everything)
            own, other = f"{directory}/{tenant_a}/app", f"{directory}/{tenant_b}/app"
            hostile = {
                "second": f"${{mounted:{own}:topic}}${{mounted:{other}:topic}}",
                "issue": f"${{nope:x}}${{mounted:{other}:topic}}",
                "file": f"${{file:{worker.config_path}:group.id}}",
                "env": "${env:HOME}",
                "traversal": f"${{mounted:{own}/../../{tenant_b}/app:topic}}",
            }
            names = {case: f"{case}-{unique}" for case in hostile}
            for case, value in hostile.items():
                spec = file_source_spec(source, f"t-{case}-{unique}", f"{case}-offsets")
                spec["config"]["tenant.note"] = value
                create_connector(custom, tenant_a, names[case], spec)
            good, control, legacy = f"good-{unique}", f"control-{unique}", f"legacy-{unique}"
            good_spec = file_source_spec(source, "placeholder", "good-offsets")
            good_spec["config"]["topic"] = f"${{mounted:{own}:topic}}"
            create_connector(custom, tenant_a, good, good_spec)
            control_spec = file_source_spec(source, f"t-control-{unique}", "control-offsets")
            control_spec["config"]["tenant.note"] = "price ${USD}"
            create_connector(custom, tenant_a, control, control_spec)
            legacy_spec = file_source_spec(source, "placeholder", "legacy-offsets")
            legacy_spec["config"]["topic"] = f"${{mounted:{other}:topic}}"  # tenant B's own directory
            create_connector(custom, tenant_b, legacy, legacy_spec)
            self_allowed = f"self-allowed-{unique}"
            self_spec = file_source_spec(source, f"t-self-{unique}", "self-offsets")
            self_spec["config"]["tenant.note"] = hostile["file"]
            create_connector(custom, tenant_b, self_allowed, self_spec, cluster="own")

            # MirrorMaker 2: a connector config's reference, and a reference inside a Secret's value.
            secret_value = "${env:HOME}"
            core.create_namespaced_secret(
                tenant_a,
                {
                    "metadata": {"name": "east-id", "labels": {f"{GROUP}/credentials": "true"}},
                    "data": {"id": base64.b64encode(secret_value.encode()).decode()},
                },
            )
            east, west = f"e{unique}", f"w{unique}"
            quiet = {"replication.factor": 1, "offset-syncs.topic.replication.factor": 1}
            mirror_config = {"sourceCluster": east, "targetCluster": west, "topicsPattern": f"m-{unique}"}
            plain = [
                {"alias": east, "bootstrapServers": stack["kafka_b"]},
                {"alias": west, "bootstrapServers": stack["kafka_a"]},
            ]
            create_mm2(
                custom,
                tenant_a,
                "mm2-config",
                plain,
                [{**mirror_config, "sourceConnector": {"state": "stopped", "config": {**quiet, "x": hostile["file"]}}}],
            )
            with_secret = [{**plain[0], "secretConfig": {"client.id": {"name": "east-id", "key": "id"}}}, plain[1]]
            create_mm2(
                custom,
                tenant_a,
                "mm2-secret",
                with_secret,
                [{**mirror_config, "sourceConnector": {"state": "stopped", "config": quiet}}],
            )

            for case in hostile:
                assert "spec.config (tenant.note)" in refused(custom, tenant_a, names[case])
            assert f"its path '{other}' is not under" in refused(custom, tenant_a, names["second"])
            assert f"ConnectCluster {tenant_a}/local allows only mounted" in refused(custom, tenant_a, names["issue"])
            assert "'..' segment" in refused(custom, tenant_a, names["traversal"])
            assert "'file'" in refused(custom, tenant_a, names["file"])
            assert "'env'" in refused(custom, tenant_a, names["env"])
            assert "spec.configProviders.allowed is empty" in refused(custom, tenant_b, legacy)
            assert "spec.configProviders is not honoured" in refused(custom, tenant_b, self_allowed)
            said = wait_mm2_condition(custom, tenant_a, "mm2-config", "Ready", "ConfigProviderReference", "False")
            assert "'file'" in said["message"], said
            said = wait_mm2_condition(custom, tenant_a, "mm2-secret", "Ready", "ConfigProviderReference", "False")
            assert "source.cluster.client.id" in said["message"] and "${env" not in said["message"], said

            # Accepted: the worker resolves the allowed reference (records reach the topic it names).
            wait_condition(custom, tenant_a, good, "Ready", reason="ConnectorRunning", timeout=120)
            wait_condition(custom, tenant_a, control, "Ready", reason="ConnectorRunning", timeout=120)
            wait_for(f"records in {resolved_topic}", lambda: end_offset(stack["kafka_a"], resolved_topic) >= 5, 90)
            with httpx.Client(base_url=worker.url, timeout=30) as connect:
                assert connector_config(connect, control)["tenant.note"] == "price ${USD}"
                assert connector_config(connect, good)["topic"] == f"${{mounted:{own}:topic}}"
                time.sleep(10)  # two drift intervals: time for a refused resource to be sent, had it been
                never = [*names.values(), legacy, self_allowed, f"{east}->{west}.MirrorSourceConnector"]
                for name in never:
                    assert connect.get(f"/connectors/{name}").status_code == 404, name
            lines = request_lines(worker.log)
            sent = [line for line in lines if any(f"/connectors/{name}" in line for name in never[:-1])]
            assert all('"GET /connectors/' in line for line in sent), sent  # at most the 404s just asked
            created = [line for line in lines if re.search(r'"POST /connectors HTTP/[0-9.]+" 201 ', line)]
            assert len(created) == 2, created  # the good one and the control, nothing else
    finally:
        worker.stop()
