"""TLS for real: a Connect worker serving ``https://`` that demands a client certificate.

Issue 21, item 2. Until now the operator's TLS settings were proven by unit tests only. Here a
dedicated Connect worker (same jars as the stack's) serves its REST API over TLS with a
certificate signed by a CA made for this run (``tls_material.Authority``) and
``ssl.client.auth=required``. The operator reaches it through ``spec.tls.ca`` (a ConfigMap) and
``spec.tls.clientCertificate`` (a Secret that opted in as credentials), and carries out a real
``list``. Each way a user gets TLS wrong is met for real and must give a clear ``Ready=False``
condition that names the cause and holds no key or certificate material: a CA that did not sign
the worker's certificate (then fixed: the operator picks up the new CA and becomes Ready), a URL
whose host the certificate does not name, no client certificate, and an expired certificate.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import wait_for
from tests.integration.connect_worker import DedicatedWorker
from tests.integration.support import (
    annotate,
    condition,
    configmap_offsets,
    create_cluster,
    create_connector,
    file_source_spec,
    wait_annotation_removed,
    watch_until,
)
from tests.integration.tls_material import STORE_PASSWORD, Authority, Issued

# One xdist worker runs the module: its TLS worker is started once for all of its tests.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.xdist_group("tls-worker")]

GROUP, VERSION = "connect-offsets.io", "v1beta1"


class TlsWorker:
    """A dedicated Connect worker on ``https://127.0.0.1:<port>`` and the material to reach it."""

    def __init__(self, directory: Path, *, expired: bool = False) -> None:
        self.ca = Authority("connect-offsets test CA")
        self.client_ca = Authority("connect-offsets test client CA")
        self.server = self.ca.issue("127.0.0.1", ip_addresses=("127.0.0.1",), expired=expired)
        self.client = self.client_ca.issue("connect-offsets-operator", client=True)
        keystore = self.server.write_keystore(directory / "worker.p12", [self.ca.certificate])
        truststore = self.client_ca.write_truststore(directory / "clients.p12")
        (directory / "ca.pem").write_text(self.ca.cert_pem)
        (directory / "client.pem").write_text(self.client.cert_pem)
        (directory / "client.key").write_text(self.client.key_pem)
        prefix = "listeners.https."
        self.worker = DedicatedWorker(
            name="tls-expired" if expired else "tls",
            scheme="https",
            extra_props=(
                "rest.advertised.listener=https",
                f"{prefix}ssl.keystore.location={keystore}",
                f"{prefix}ssl.keystore.type=PKCS12",
                f"{prefix}ssl.keystore.password={STORE_PASSWORD}",
                f"{prefix}ssl.key.password={STORE_PASSWORD}",
                f"{prefix}ssl.truststore.location={truststore}",
                f"{prefix}ssl.truststore.type=PKCS12",
                f"{prefix}ssl.truststore.password={STORE_PASSWORD}",
                f"{prefix}ssl.client.auth=required",
            ),
            probe_options={"verify": self.ssl_context(directory, verify=not expired)},
        )

    @staticmethod
    def ssl_context(directory: Path, *, verify: bool = True) -> ssl.SSLContext:
        """What a client that does everything right uses: our CA and our client certificate."""
        context = ssl.create_default_context(cafile=str(directory / "ca.pem"))
        if not verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        context.load_cert_chain(str(directory / "client.pem"), str(directory / "client.key"))
        return context

    @property
    def url(self) -> str:
        return self.worker.url


@pytest.fixture(scope="module")
def tls_worker(tmp_path_factory: pytest.TempPathFactory, stack: dict[str, Any]) -> Iterator[TlsWorker]:
    worker = TlsWorker(tmp_path_factory.mktemp("tls"))
    worker.worker.start()
    yield worker
    worker.worker.stop()


def put_ca(core: Any, namespace: str, pem: str, name: str = "connect-ca") -> None:
    body = {"metadata": {"name": name}, "data": {"ca.crt": pem}}
    try:
        core.create_namespaced_config_map(namespace, body)
    except Exception:
        core.replace_namespaced_config_map(name, namespace, body)


def put_client_secret(core: Any, namespace: str, issued: Issued, name: str = "connect-client") -> None:
    core.create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": name, "labels": {f"{GROUP}/credentials": "true"}},
            "type": "kubernetes.io/tls",
            "stringData": {"tls.crt": issued.cert_pem, "tls.key": issued.key_pem},
        },
    )


def tls_spec(with_client: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"ca": {"configMap": {"name": "connect-ca", "key": "ca.crt"}}}
    if with_client:
        spec["clientCertificate"] = {"secretName": "connect-client"}
    return spec


def ready_condition(custom: Any, namespace: str, status: str, timeout: float = 60) -> dict[str, Any]:
    def check(body: dict[str, Any]) -> dict[str, Any] | None:
        found = condition(body, "Ready")
        return found if found and found["status"] == status else None

    what = f"ConnectCluster Ready={status} in {namespace}"
    return watch_until(custom, namespace, "connectclusters", "local", what, check, timeout)


def assert_no_key_material(text: str, worker: TlsWorker) -> None:
    assert "PRIVATE KEY" not in text and "BEGIN CERTIFICATE" not in text
    for pem in (worker.client.key_pem, worker.client.cert_pem, worker.ca.cert_pem):
        body = "".join(pem.splitlines()[1:-1])
        assert body[:40] not in text


def test_operator_lists_offsets_over_mutual_tls(
    tls_worker: TlsWorker, operator: Any, core: Any, custom: Any, namespace: str, tmp_path: Path
) -> None:
    put_ca(core, namespace, tls_worker.ca.cert_pem)
    put_client_secret(core, namespace, tls_worker.client)
    create_cluster(custom, namespace, tls_worker.url, tls=tls_spec())
    ready = ready_condition(custom, namespace, "True")
    assert ready["reason"] == "Reachable" and tls_worker.url in ready["message"]

    source = tmp_path / "in.txt"
    source.write_text("".join(f"line {i}\n" for i in range(5)))
    name = f"tls-{namespace[-6:]}"
    create_connector(custom, namespace, name, file_source_spec(source, f"tls-{namespace}", "tls-offsets"))
    client = httpx.Client(base_url=tls_worker.url, verify=tls_worker.worker.probe_options["verify"], timeout=10)
    wait_for(
        f"{name}'s offsets committed",
        lambda: (offsets := client.get(f"/connectors/{name}/offsets")).status_code == 200 and offsets.json()["offsets"],
    )
    annotate(custom, namespace, name, connector_offsets="list")
    wait_annotation_removed(custom, namespace, name)
    listed = configmap_offsets(core, namespace, "tls-offsets")
    assert listed["offsets"] == client.get(f"/connectors/{name}/offsets").json()["offsets"]
    assert listed["offsets"][0]["partition"] == {"filename": str(source)}
    client.delete(f"/connectors/{name}")


def test_a_ca_that_did_not_sign_the_worker_is_named_then_fixed(
    tls_worker: TlsWorker, operator: Any, core: Any, custom: Any, namespace: str
) -> None:
    put_ca(core, namespace, Authority("someone else's CA").cert_pem)
    put_client_secret(core, namespace, tls_worker.client)
    create_cluster(custom, namespace, tls_worker.url, tls=tls_spec())
    ready = ready_condition(custom, namespace, "False")
    assert "CERTIFICATE_VERIFY_FAILED" in ready["message"], ready
    assert_no_key_material(str(ready), tls_worker)
    # The platform fixes the ConfigMap: the operator builds a new client with the right CA.
    put_ca(core, namespace, tls_worker.ca.cert_pem)
    ready = ready_condition(custom, namespace, "True", timeout=90)
    assert ready["reason"] == "Reachable"


def test_a_certificate_for_another_host_is_named(
    tls_worker: TlsWorker, operator: Any, core: Any, custom: Any, namespace: str
) -> None:
    put_ca(core, namespace, tls_worker.ca.cert_pem)
    put_client_secret(core, namespace, tls_worker.client)
    # The certificate names 127.0.0.1 only; localhost is the same worker under another name.
    create_cluster(custom, namespace, tls_worker.url.replace("127.0.0.1", "localhost"), tls=tls_spec())
    ready = ready_condition(custom, namespace, "False")
    assert "CERTIFICATE_VERIFY_FAILED" in ready["message"] and "localhost" in ready["message"], ready
    assert_no_key_material(str(ready), tls_worker)


def test_no_client_certificate_is_refused_by_the_worker_and_reported(
    tls_worker: TlsWorker, operator: Any, core: Any, custom: Any, namespace: str
) -> None:
    put_ca(core, namespace, tls_worker.ca.cert_pem)
    create_cluster(custom, namespace, tls_worker.url, tls=tls_spec(with_client=False))
    ready = ready_condition(custom, namespace, "False")
    assert ready["reason"] == "Unreachable", ready
    assert "ALERT_BAD_CERTIFICATE" in ready["message"] or "CERTIFICATE_REQUIRED" in ready["message"], ready
    assert "check spec.tls.clientCertificate" in ready["message"], ready


def test_an_expired_certificate_is_named(
    tmp_path: Path, stack: dict[str, Any], operator: Any, core: Any, custom: Any, namespace: str
) -> None:
    expired = TlsWorker(tmp_path, expired=True)
    expired.worker.start()
    try:
        put_ca(core, namespace, expired.ca.cert_pem)
        put_client_secret(core, namespace, expired.client)
        create_cluster(custom, namespace, expired.url, tls=tls_spec())
        ready = ready_condition(custom, namespace, "False")
        assert "certificate has expired" in ready["message"], ready
        assert_no_key_material(str(ready), expired)
    finally:
        expired.worker.stop()
