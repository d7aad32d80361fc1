"""Unit tests for where credentials may go (``clients.credentials``) and the code that applies it.

* the policy: allow-list parsing and matching, TLS-only credentials, user info in URLs;
* ``reflect``: the one helper for text a Connect URL sends back (cap, redaction, user info);
* ``KubernetesApi.get_secret_data``: the opt-in label, only the wanted keys decoded (binary keys);
* ``ClusterRegistry`` and ``mirror_secrets``: refusals come before any Secret is read, with the
  policy's reason; the ConnectCluster model refuses user info without repeating it.

In-memory fakes only (no API server, no network).
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Iterable
from typing import Any

import httpx
import pytest
from kubernetes import client
from pydantic import ValidationError

from connect_offsets.clients.connect import (
    ConnectAuth,
    ConnectBadRequest,
    ConnectClient,
    ConnectEndpoint,
    ConnectServerError,
)
from connect_offsets.clients.credentials import (
    CREDENTIALS_LABEL,
    MAX_REFLECTED_BYTES,
    CredentialsPolicy,
    CredentialsRefused,
    Destination,
    HostPattern,
    kafka_hosts,
    parse_allowed_hosts,
    reflect,
    strip_userinfo,
)
from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesRejected
from connect_offsets.lag import MirrorSecrets, mirror_secrets
from connect_offsets.models.crds import ConnectClusterResource, ConnectClusterSpec, KafkaMirrorMaker2Resource
from connect_offsets.reconcile.cluster_service import MAX_PLUGINS_SHOWN, MAX_SERVER_FIELD, ClusterService
from connect_offsets.reconcile.clusters import ClusterRegistry, ClusterUnusable

TOKEN = "tok-7f3a9c2e51d04b8e"
OPTED_IN = {CREDENTIALS_LABEL: "true"}

# --- policy -------------------------------------------------------------------------------------


def test_allowed_hosts_parse_and_match() -> None:
    patterns = parse_allowed_hosts(" connect.kafka.svc:8083 , *.example.com,[::1]:9092,Upper.Example.ORG.")
    assert patterns == (
        HostPattern("connect.kafka.svc", 8083),
        HostPattern("*.example.com"),
        HostPattern("::1", 9092),
        HostPattern("upper.example.org"),
    )
    exact, wildcard, ipv6, upper = patterns
    assert exact.matches("connect.kafka.svc", 8083) and not exact.matches("connect.kafka.svc", 8084)
    assert not exact.matches("evil-connect.kafka.svc", 8083)
    assert wildcard.matches("a.example.com", 1) and wildcard.matches("a.b.example.com", None)
    assert not wildcard.matches("example.com", 443)  # the apex is not below itself
    assert not wildcard.matches("badexample.com", 443)
    assert ipv6.matches("[::1]", 9092)
    assert upper.matches("UPPER.example.org.", 80)
    assert parse_allowed_hosts("") == () and parse_allowed_hosts(" , ") == ()


@pytest.mark.parametrize("bad", ["*", "a*.example.com", "*.*.com", "host:99999", "user@host", "http://host", "a b"])
def test_allowed_hosts_refuse_malformed_entries(bad: str) -> None:
    with pytest.raises(ValueError, match="CONNECT_OFFSETS_ALLOWED_HOSTS"):
        parse_allowed_hosts(bad)


def test_policy_from_env() -> None:
    assert CredentialsPolicy.from_env({}) == CredentialsPolicy(False, ())
    policy = CredentialsPolicy.from_env(
        {"CONNECT_OFFSETS_ALLOW_PLAINTEXT_CREDENTIALS": "True", "CONNECT_OFFSETS_ALLOWED_HOSTS": "a.svc"}
    )
    assert policy == CredentialsPolicy(True, (HostPattern("a.svc"),))
    with pytest.raises(ValueError, match="expected true or false"):
        CredentialsPolicy.from_env({"CONNECT_OFFSETS_ALLOW_PLAINTEXT_CREDENTIALS": "maybe"})


def refused(call: Any) -> CredentialsRefused:
    with pytest.raises(CredentialsRefused) as caught:
        call()
    return caught.value


def test_connect_url_rules() -> None:
    strict = CredentialsPolicy()
    strict.check_connect_url("https://connect:8443", credentials=True)
    strict.check_connect_url("http://connect:8083", credentials=False)  # nothing secret travels
    error = refused(lambda: strict.check_connect_url("http://connect:8083", credentials=True))
    assert error.reason == "PlaintextCredentials" and "https" in str(error)
    CredentialsPolicy(allow_plaintext=True).check_connect_url("http://connect:8083", credentials=True)

    error = refused(lambda: strict.check_connect_url(f"http://admin:{TOKEN}@connect:8083", credentials=False))
    assert error.reason == "InvalidSpec" and TOKEN not in str(error)

    listed = CredentialsPolicy(allowed_hosts=parse_allowed_hosts("connect.svc:443,*.kafka.svc"))
    listed.check_connect_url("https://connect.svc", credentials=True)  # default port 443
    listed.check_connect_url("http://c.kafka.svc:8083", credentials=False)
    for url in ("http://connect.svc", "https://connect.svc:8443", "https://kafka.svc", "https://evil.test"):
        error = refused(lambda url=url: listed.check_connect_url(url, credentials=False))
        assert error.reason == "HostNotAllowed" and "nothing was sent" in str(error)


def test_kafka_rules() -> None:
    assert kafka_hosts("a:9092, SASL_SSL://B.example:9093,[::1]:1,c") == [
        ("a", 9092),
        ("b.example", 9093),
        ("::1", 1),
        ("c", None),
    ]
    strict = CredentialsPolicy(allowed_hosts=parse_allowed_hosts("*.kafka.svc:9092,*.kafka.svc:9093"))
    for protocol in ("SSL", "sasl_ssl"):
        strict.check_kafka("x", "b.kafka.svc:9093", {"security.protocol": protocol}, credentials=True)
    strict.check_kafka("x", "b.kafka.svc", {}, credentials=False)  # no port: Kafka's 9092
    for protocol in (None, "PLAINTEXT", "SASL_PLAINTEXT"):
        config = {} if protocol is None else {"security.protocol": protocol}
        error = refused(
            lambda config=config: strict.check_kafka("clusters[east]", "b.kafka.svc", config, credentials=True)
        )
        assert error.reason == "PlaintextCredentials" and str(error).startswith("clusters[east]")
    CredentialsPolicy(allow_plaintext=True).check_kafka("x", "anything:1", {}, credentials=True)
    error = refused(lambda: strict.check_kafka("x", "b.kafka.svc:9092,evil.test:9092", {}, credentials=False))
    assert error.reason == "HostNotAllowed" and "evil.test:9092" in str(error)
    assert refused(lambda: kafka_hosts("a:b:c")).reason == "InvalidBootstrapServers"


# --- reflect -------------------------------------------------------------------------------------


def test_reflect_caps_redacts_and_strips_userinfo() -> None:
    text = f"failed at https://bob:{TOKEN}x@connect:8083/ with Bearer {TOKEN} " + "é" * 2000
    out = reflect(text, [TOKEN, "abc"])
    assert TOKEN not in out and "bob" not in out
    assert "https://connect:8083/" in out and "Bearer ***" in out
    assert len(out.encode()) <= MAX_REFLECTED_BYTES and out.endswith("(cut)")
    assert reflect("short abc", ["abc"]) == "short abc"  # too short to be masked sensibly
    assert reflect("plain", []) == "plain"


def test_reflect_masks_the_longest_secret_whole_and_never_half() -> None:
    assert reflect(f"{TOKEN}-suffix", [TOKEN, f"{TOKEN}-suffix"]) == "***"
    # A secret straddling the cut is masked before cutting, so no prefix of it shows.
    text = "x" * (MAX_REFLECTED_BYTES - 8) + TOKEN
    out = reflect(text, [TOKEN])
    assert TOKEN[:6] not in out


def test_reflect_is_linear_on_hostile_text() -> None:
    # Millions of "a" without "://": bounded work (only a prefix is looked at).
    out = reflect("a" * 5_000_000 + "://u:p@h", ["p@hx"])
    assert len(out.encode()) <= MAX_REFLECTED_BYTES
    assert strip_userinfo("see http://u:p@h/x and ftp://h/y") == "see http://h/x and ftp://h/y"


def test_connect_errors_are_reflected_through_the_helper() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        echoed = request.headers["authorization"]
        return httpx.Response(500, json={"error_code": 500, "message": f"you sent {echoed} " + "x" * 50_000})

    async def run() -> ConnectServerError:
        endpoint = ConnectEndpoint(url="https://connect:8443", auth=ConnectAuth.bearer(TOKEN))
        async with ConnectClient(endpoint, transport=httpx.MockTransport(handler)) as connect:
            with pytest.raises(ConnectServerError) as caught:
                await connect.server_info()
            assert connect.known_secrets == (TOKEN,)
            return caught.value

    error = asyncio.run(run())
    assert error.message.startswith("you sent Bearer ***") and TOKEN not in str(error)
    assert len(error.message.encode()) <= MAX_REFLECTED_BYTES


def test_values_sent_inside_configs_are_redacted_too() -> None:
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required password="s3cr3t-value";'

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error_code": 400, "message": f"Invalid value {jaas} for sasl.jaas.config"})

    async def run() -> str:
        async with ConnectClient(ConnectEndpoint(url="https://c"), transport=httpx.MockTransport(handler)) as connect:
            connect.also_redact([jaas, "ab"])
            assert connect.known_secrets == (jaas,)
            with pytest.raises(ConnectBadRequest) as caught:
                await connect.put_connector_config("m", {"source.cluster.sasl.jaas.config": jaas})
            return str(caught.value)

    text = asyncio.run(run())
    assert "s3cr3t-value" not in text and "Invalid value *** for sasl.jaas.config" in text


def test_status_traces_are_redacted() -> None:
    trace = f"org.apache.kafka.connect.errors.ConnectException: login as admin:{TOKEN} failed\n\tat x.y(Z.java:1)"

    def handler(request: httpx.Request) -> httpx.Response:
        failed = {"state": "FAILED", "worker_id": "w", "trace": trace}
        return httpx.Response(200, json={"name": "c", "connector": failed, "tasks": [{**failed, "id": 0}]})

    async def run(auth: ConnectAuth | None) -> Any:
        endpoint = ConnectEndpoint(url="https://c", auth=auth)
        async with ConnectClient(endpoint, transport=httpx.MockTransport(handler)) as connect:
            return await connect.get_connector_status("c")

    status = asyncio.run(run(ConnectAuth.basic("admin", TOKEN)))
    assert status.connector.trace == trace.replace(TOKEN, "***")
    assert status.tasks[0].trace == trace.replace(TOKEN, "***") and status.tasks[0].id == 0
    assert status.first_trace() == "org.apache.kafka.connect.errors.ConnectException: login as admin:*** failed"
    assert asyncio.run(run(None)).connector.trace == trace  # nothing to redact: untouched


# --- Secrets -------------------------------------------------------------------------------------


class FakeCore:
    """Only what get_secret_data calls; counts reads."""

    def __init__(self, secrets: dict[str, client.V1Secret]) -> None:
        self.secrets = secrets
        self.reads: list[str] = []

    def read_namespaced_secret(self, name: str, namespace: str) -> client.V1Secret:
        self.reads.append(name)
        if name not in self.secrets:
            raise client.exceptions.ApiException(status=404, reason="Not Found")
        return self.secrets[name]


def make_secret(name: str, labels: dict[str, str] | None, **data: bytes) -> client.V1Secret:
    return client.V1Secret(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        data={k.replace("_", "."): base64.b64encode(v).decode() for k, v in data.items()},
    )


def kube_with(*secrets: client.V1Secret) -> tuple[KubernetesApi, FakeCore]:
    kube = KubernetesApi(client.ApiClient())
    fake = FakeCore({s.metadata.name: s for s in secrets})
    kube.core = fake  # type: ignore[assignment]
    return kube, fake


P12 = bytes(range(128, 256)) * 3  # a PKCS#12 file is binary: not UTF-8


async def test_get_secret_data_needs_the_label() -> None:
    kube, _ = kube_with(
        make_secret("plain", None, token=TOKEN.encode()),
        make_secret("other-value", {CREDENTIALS_LABEL: "yes"}, token=TOKEN.encode()),
    )
    for name in ("plain", "other-value"):
        with pytest.raises(CredentialsRefused) as caught:
            await kube.get_secret_data("ns", name, ["token"], sent_to=())
        assert caught.value.reason == "SecretNotOptedIn"
        assert f"Secret {name}" in str(caught.value) and f"{CREDENTIALS_LABEL}=true" in str(caught.value)
        assert TOKEN not in str(caught.value)
    with pytest.raises(KubernetesRejected) as missing:
        await kube.get_secret_data("ns", "absent", ["token"], sent_to=())
    assert missing.value.status == 404


async def test_get_secret_data_decodes_only_the_wanted_keys() -> None:
    kube, _ = kube_with(make_secret("kafka-user", OPTED_IN, user_p12=P12, user_password=b"pw-\xc3\xa9t\xc3\xa9"))
    assert await kube.get_secret_data("ns", "kafka-user", ["user.password", "absent"], sent_to=()) == {
        "user.password": "pw-été"
    }
    with pytest.raises(CredentialsRefused) as caught:
        await kube.get_secret_data("ns", "kafka-user", ["user.p12"], sent_to=())
    assert caught.value.reason == "SecretKeyNotText"
    assert "user.p12" in str(caught.value) and "position 0" in str(caught.value)
    assert "\\x80" not in str(caught.value) and "0x80" not in str(caught.value)  # no secret bytes


def cluster_spec(url: str, **spec: Any) -> ConnectClusterSpec:
    return ConnectClusterSpec.model_validate({"url": url, **spec})


async def test_registry_refuses_before_reading_any_secret() -> None:
    kube, fake = kube_with(make_secret("creds", OPTED_IN, token=TOKEN.encode()))
    bearer = {"authentication": {"type": "bearer", "secretName": "creds"}}
    strict = ClusterRegistry(kube, CredentialsPolicy(allowed_hosts=parse_allowed_hosts("connect.svc")))
    cases = [
        (cluster_spec("http://connect.svc", **bearer), "PlaintextCredentials"),
        (cluster_spec("https://evil.test", **bearer), "HostNotAllowed"),
        (cluster_spec("https://evil.test"), "HostNotAllowed"),
    ]
    for spec, reason in cases:
        with pytest.raises(ClusterUnusable) as caught:
            await strict.endpoint("ns", spec)
        assert caught.value.reason == reason
    assert fake.reads == []
    endpoint = await strict.endpoint("ns", cluster_spec("https://connect.svc", **bearer))
    assert endpoint.auth == ConnectAuth.bearer(TOKEN) and fake.reads == ["creds"]


async def test_registry_reports_the_secret_refusal_reason() -> None:
    kube, _ = kube_with(
        make_secret("unlabelled", None, token=TOKEN.encode()),
        make_secret("strimzi", OPTED_IN, ca_crt=b"-----BEGIN CERTIFICATE-----", user_p12=P12),
    )
    registry = ClusterRegistry(kube, CredentialsPolicy(allow_plaintext=True))
    with pytest.raises(ClusterUnusable) as caught:
        await registry.endpoint(
            "ns", cluster_spec("http://c", authentication={"type": "bearer", "secretName": "unlabelled"})
        )
    assert caught.value.reason == "SecretNotOptedIn" and caught.value.reason_or("x") == "SecretNotOptedIn"
    with pytest.raises(ClusterUnusable) as binary:
        await registry.endpoint(
            "ns", cluster_spec("https://c", tls={"ca": {"secret": {"name": "strimzi", "key": "user.p12"}}})
        )
    assert binary.value.reason == "SecretKeyNotText"


class FakeKube:
    """get_resource + get_secret_data, for ClusterRegistry.kafka_config and mirror_secrets."""

    def __init__(self, body: dict[str, Any] | None = None) -> None:
        self.body = body
        self.reads: list[str] = []
        self.sent_to: dict[str, set[str]] = {}

    async def get_resource(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.body

    cached_resource = get_resource  # no watch here: the cache answers what a GET would

    async def get_secret_data(
        self, namespace: str, name: str, keys: list[str], *, sent_to: Iterable[Destination]
    ) -> dict[str, str]:
        self.reads.append(name)
        self.sent_to.setdefault(name, set()).update(str(d) for d in sent_to)
        return dict.fromkeys(keys, "org.example.Login required;")


async def test_kafka_config_follows_the_policy() -> None:
    body = {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {
            "url": "https://c",
            "kafka": {
                "bootstrapServers": "k.kafka.svc:9092",
                "config": {"security.protocol": "SASL_PLAINTEXT"},
                "secretConfig": {"sasl.jaas.config": {"name": "jaas", "key": "jaas"}},
            },
        },
    }
    kube = FakeKube(body)
    with pytest.raises(ClusterUnusable) as caught:
        await ClusterRegistry(kube, CredentialsPolicy()).kafka_config("ns", "c")  # type: ignore[arg-type]
    assert caught.value.reason == "PlaintextCredentials" and kube.reads == []
    with pytest.raises(ClusterUnusable) as outside:
        await ClusterRegistry(kube, CredentialsPolicy(True, parse_allowed_hosts("*.other"))).kafka_config("ns", "c")  # type: ignore[arg-type]
    assert outside.value.reason == "HostNotAllowed" and kube.reads == []
    settings = await ClusterRegistry(kube, CredentialsPolicy(allow_plaintext=True)).kafka_config("ns", "c")  # type: ignore[arg-type]
    assert settings["bootstrap.servers"] == "k.kafka.svc:9092" and kube.reads == ["jaas"]
    # No spec.kafka: the message names the cluster and the field; its two users (seek, sink
    # progress) each put what needed it in front.
    del body["spec"]["kafka"]
    with pytest.raises(ClusterUnusable) as absent:
        await ClusterRegistry(kube, CredentialsPolicy()).kafka_config("ns", "c")  # type: ignore[arg-type]
    assert str(absent.value) == "ConnectCluster c has no spec.kafka"


def mirror(clusters: list[dict[str, Any]]) -> KafkaMirrorMaker2Resource:
    return KafkaMirrorMaker2Resource.model_validate(
        {
            "metadata": {"name": "m", "namespace": "ns", "labels": {"connect-offsets.io/cluster": "c"}},
            "spec": {"clusters": clusters, "mirrors": [{"sourceCluster": "east", "targetCluster": "west"}]},
        }
    )


async def test_mirror_secrets_checks_every_cluster_before_reading() -> None:
    jaas = {"sasl.jaas.config": {"name": "east-jaas", "key": "jaas"}}
    resource = mirror(
        [
            {
                "alias": "east",
                "bootstrapServers": "e:9093",
                "config": {"security.protocol": "SASL_SSL"},
                "secretConfig": jaas,
            },
            {"alias": "west", "bootstrapServers": "w:9092", "secretConfig": jaas},
        ]
    )
    kube = FakeKube()
    with pytest.raises(CredentialsRefused) as caught:
        await mirror_secrets(kube, resource, CredentialsPolicy())  # type: ignore[arg-type]
    assert caught.value.reason == "PlaintextCredentials" and "clusters[west]" in str(caught.value)
    assert kube.reads == []  # east was fine, but nothing is read until every cluster is
    with pytest.raises(CredentialsRefused) as outside:
        await mirror_secrets(kube, resource, CredentialsPolicy(True, parse_allowed_hosts("e")))  # type: ignore[arg-type]
    assert outside.value.reason == "HostNotAllowed" and "w:9092" in str(outside.value)
    values = await mirror_secrets(kube, resource, CredentialsPolicy(allow_plaintext=True))  # type: ignore[arg-type]
    assert values == {("east-jaas", "jaas"): "org.example.Login required;"}


async def test_mirror_secrets_are_reused_per_spec_for_a_minute_and_shared() -> None:
    """The reconcile and the lag monitor share one reader: each Secret is read once per minute at
    most while the spec is unchanged; a new generation, a re-created mirror (new uid), a failed read
    or forget() read again at once."""
    jaas = {"sasl.jaas.config": {"name": "east-jaas", "key": "jaas"}}
    west = {"alias": "west", "bootstrapServers": "w:9092"}
    resource = mirror([{"alias": "east", "bootstrapServers": "e:9093", "secretConfig": jaas}, west])
    resource.metadata.uid, resource.metadata.generation = "uid-1", 1
    kube, now = FakeKube(), [100.0]
    secrets = MirrorSecrets(kube, CredentialsPolicy(allow_plaintext=True), clock=lambda: now[0])  # type: ignore[arg-type]
    expected = {("east-jaas", "jaas"): "org.example.Login required;"}
    assert await secrets.read(resource) == expected and kube.reads == ["east-jaas"]
    now[0] += 59.0
    assert await secrets.read(resource) == expected and kube.reads == ["east-jaas"]  # reused
    now[0] += 2.0
    assert await secrets.read(resource) == expected and len(kube.reads) == 2  # a minute passed: read again
    changed = resource.model_copy(deep=True)
    changed.metadata.generation = 2
    await secrets.read(changed)
    assert len(kube.reads) == 3  # the spec changed: read at once
    recreated = changed.model_copy(deep=True)
    recreated.metadata.uid = "uid-2"
    await secrets.read(recreated)
    assert len(kube.reads) == 4  # same name, another resource: never the old values
    secrets.forget("ns", "m")
    await secrets.read(recreated)
    assert len(kube.reads) == 5
    plain = mirror([{"alias": "east", "bootstrapServers": "e:9092"}, west])
    assert await secrets.read(plain) == {} and len(kube.reads) == 5

    class Failing(FakeKube):
        async def get_secret_data(
            self, namespace: str, name: str, keys: list[str], *, sent_to: Iterable[Destination]
        ) -> dict[str, str]:
            self.reads.append(name)
            return {}  # the key is missing: LookupError, not kept

    failing = Failing()
    reader = MirrorSecrets(failing, CredentialsPolicy(allow_plaintext=True), clock=lambda: now[0])  # type: ignore[arg-type]
    for _ in range(2):
        with pytest.raises(LookupError, match="Secret east-jaas has no key jaas"):
            await reader.read(resource)
    assert failing.reads == ["east-jaas", "east-jaas"]


# --- the ConnectCluster model ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", [f"http://admin:{TOKEN}@connect:8083", f"https://{TOKEN}@connect", f"http://u:{TOKEN}@c:1/path@x"]
)
def test_url_with_userinfo_is_refused_without_echo(url: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ConnectClusterResource.model_validate({"metadata": {"name": "c", "namespace": "n"}, "spec": {"url": url}})
    messages = [e["msg"] for e in caught.value.errors()]
    assert any("must not contain user info" in m for m in messages)
    assert all(TOKEN not in m for m in messages)
    pattern = ConnectClusterSpec.model_json_schema(by_alias=True)["properties"]["url"]["pattern"]
    assert re.match(pattern, url) is None  # the CRD schema refuses it too


def test_url_with_at_in_the_path_is_fine() -> None:
    spec = cluster_spec("https://connect:8443/api/@v1")
    assert spec.url == "https://connect:8443/api/@v1"


# --- the ConnectCluster probe ----------------------------------------------------------------------


class StatusKube:
    """get_resource + patch_status: what ClusterService.reconcile touches."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.patches: list[dict[str, Any]] = []

    async def get_resource(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        return self.body

    cached_resource = get_resource  # no watch here: the cache answers what a GET would

    async def patch_status(
        self, plural: str, namespace: str, name: str, status: dict[str, Any]
    ) -> dict[str, Any] | None:
        self.patches.append(status)
        return None


class ProbeRegistry:
    """ClusterRegistry.refresh with a client on a MockTransport that answers like a hostile worker."""

    def __init__(self, handler: Any) -> None:
        self.client = ConnectClient(
            ConnectEndpoint(url="https://c", auth=ConnectAuth.basic("admin", TOKEN)),
            transport=httpx.MockTransport(handler),
        )

    async def refresh(self, namespace: str, name: str) -> tuple[ConnectClient, Any]:
        return self.client, await self.client.server_info()

    def snapshot(self, namespace: str, name: str) -> None:
        return None  # the probe alone: no connector snapshot

    drift_interval = 30.0

    def set_health(self, namespace: str, name: str, health: tuple[str, str] | None) -> None:
        self.answer = health

    def health_age(self, namespace: str, name: str) -> float:
        return float("inf")

    def health(self, namespace: str, name: str) -> None:
        return None


async def test_cluster_status_reflects_server_info_capped_and_redacted() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/":
            return httpx.Response(200, json={"version": f"4.1.1 {TOKEN} " + "v" * 5000, "commit": "x" * 9000})
        if request.url.path == "/health":
            return httpx.Response(200, json={"status": "healthy", "message": "Worker has completed startup"})
        plugins = [{"class": f"org.example.P{i}", "type": "sink"} for i in range(MAX_PLUGINS_SHOWN + 50)]
        return httpx.Response(200, json=plugins)

    body = {"metadata": {"name": "c", "namespace": "ns", "generation": 1}, "spec": {"url": "https://c"}}
    kube = StatusKube(body)
    await ClusterService(kube, ProbeRegistry(handler)).reconcile("ns", "c")  # type: ignore[arg-type]
    (status,) = kube.patches
    assert TOKEN not in json.dumps(status) and status["version"].startswith("4.1.1 ***")
    assert len(status["version"].encode()) <= MAX_SERVER_FIELD and len(status["commit"].encode()) <= MAX_SERVER_FIELD
    assert len(status["connectorPlugins"]) == MAX_PLUGINS_SHOWN
    assert len(status["conditions"][0]["message"].encode()) < 2 * MAX_SERVER_FIELD
