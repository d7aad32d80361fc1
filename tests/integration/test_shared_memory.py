"""Memory stays bounded whatever a tenant sends (issue 18, point 4).

Under the chart's RBAC, with the document cap set through the chart (64 MiB): tenant A's gzip
ConfigMap that inflates to 512 MiB, and tenant A's ConnectCluster whose ``spec.url`` is a server
answering ``GET /`` with 300 KB of gzip that inflate to 300 MiB. Both end in a condition naming the
cap; the operator's peak RSS (VmHWM) stays under the cap + 100 MiB; tenant B's requests complete.
Before: the bomb took the operator to 463 MiB, the answer to 300 MiB more.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from connect_offsets.clients.limits import MAX_SMALL_RESPONSE_BYTES
from tests.conftest import wait_for
from tests.integration.chart_install import chart_operator, tenant_namespaces
from tests.integration.hostile import gzip_zeros, huge_answers, peak_rss_mib
from tests.integration.support import (
    GROUP,
    VERSION,
    annotate,
    condition,
    connect_offsets,
    create_cluster,
    create_connector,
    file_source_spec,
    get_connector,
    wait_annotation_removed,
    wait_condition,
)

CAP = 64 << 20


@pytest.fixture
def huge_answer_server() -> Iterator[tuple[str, list[str]]]:
    with huge_answers() as served:
        yield served


# Not serial: the peak RSS (VmHWM) measured is the operator process's own, which other tests' load
# does not change (issue 32 moved it into the parallel part).
@pytest.mark.timeout(600)
def test_a_gzip_bomb_and_a_huge_connect_answer_stay_under_the_cap(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    huge_answer_server: tuple[str, list[str]],
) -> None:
    hostile_url, requests_seen = huge_answer_server
    with (
        tenant_namespaces(core, custom, namespace) as (tenant_a, tenant_b),
        chart_operator(stack, core, custom, tmp_path, [tenant_a, tenant_b], values=[f"maxDocumentBytes={CAP}"]) as op,
    ):
        assert op.chart_env["CONNECT_OFFSETS_MAX_DOCUMENT_BYTES"] == str(CAP)
        bombed, calm = f"bomb-{unique}", f"calm-{unique}"
        for tenant in (tenant_a, tenant_b):
            create_cluster(custom, tenant, connect_url)
        create_cluster(custom, tenant_a, hostile_url, name="hostile")
        source_a, source_b = tmp_path / "a.txt", tmp_path / "b.txt"
        source_a.write_text("one\n")
        source_b.write_text("two\n")
        create_connector(custom, tenant_a, bombed, file_source_spec(source_a, bombed, "bomb-offsets", state="stopped"))
        create_connector(custom, tenant_b, calm, file_source_spec(source_b, calm, "calm-offsets"))
        on_hostile = f"onhostile-{unique}"
        create_connector(
            custom, tenant_a, on_hostile, file_source_spec(source_a, on_hostile, "x-offsets"), cluster="hostile"
        )
        try:
            wait_condition(custom, tenant_a, bombed, "Ready", reason="ConnectorStopped", timeout=90)
            wait_condition(custom, tenant_b, calm, "Ready", reason="ConnectorRunning", timeout=90)
            wait_for("tenant B's offsets committed", lambda: connect_offsets(connect, calm))
            assert op.operator.process is not None
            pid = op.operator.process.pid

            # The gzip bomb: 512 MiB of zeros in about 500 KB of binaryData.
            bomb = gzip_zeros(512 << 20)
            assert len(bomb) < 1_000_000
            core.create_namespaced_config_map(
                tenant_a,
                {
                    "metadata": {"name": "bomb-offsets"},
                    "binaryData": {"offsets.json.gz": base64.b64encode(bomb).decode()},
                },
            )
            annotate(custom, tenant_a, bombed, connector_offsets="alter")
            refused = wait_for(
                "the bomb refused",
                lambda: condition(get_connector(custom, tenant_a, bombed), "OffsetsOperationFailed"),
                timeout=60,
            )
            assert refused["reason"] == "DocumentTooLarge", refused
            assert f"inflates beyond {CAP} bytes" in refused["message"], refused
            assert connect_offsets(connect, bombed) == []

            # The huge answer to GET /: the ConnectCluster and its connector say why.
            def hostile_ready() -> dict[str, Any] | None:
                body = custom.get_namespaced_custom_object(GROUP, VERSION, tenant_a, "connectclusters", "hostile")
                found = condition(body, "Ready")
                return found if found and found["status"] == "False" and "larger than" in found["message"] else None

            ready = wait_for("the hostile ConnectCluster reported", hostile_ready, timeout=90)
            assert f"larger than {MAX_SMALL_RESPONSE_BYTES} bytes" in ready["message"], ready
            wait_condition(custom, tenant_a, on_hostile, "Ready", status="False", timeout=90)
            assert requests_seen and set(requests_seen) <= {"/"}, requests_seen

            # Tenant B is served all along.
            annotate(custom, tenant_b, calm, connector_offsets="list")
            body = wait_annotation_removed(custom, tenant_b, calm, timeout=60)
            assert body["status"]["lastOffsetsOperation"]["result"] == "Succeeded"

            peak = peak_rss_mib(pid)
            print(f"operator peak RSS {peak:.0f} MiB (cap {CAP >> 20} MiB)")
            assert peak < (CAP >> 20) + 100, peak
        finally:
            for name in (bombed, calm, on_hostile):
                connect.delete(f"/connectors/{name}")
