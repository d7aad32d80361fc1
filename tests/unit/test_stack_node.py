"""hack/stack.py's node (issue 47 item 1), without starting it: on demand only, every file it writes
kept under the stack folder (containerd's config, root, state and socket; kubelet's and kube-proxy's
configs; the CNI config), the settings this machine needs (cgroup v1, no CAP_SYS_RESOURCE, no
registry), the sandbox image packed from the local pause binary, and a ``down`` that leaves a stack
without a node alone and cleans only kubelet's own iptables chains. hack/node_gateway.py's forwarding
runs for real on loopback addresses."""

from __future__ import annotations

import asyncio
import hashlib
import io
import ipaddress
import json
import subprocess
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

from tests.hack_scripts import load_hack_script


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("CONNECT_OFFSETS_STACK_DIR", str(tmp_path / "stack"))
    module = load_hack_script("stack")
    # Nothing of this machine is touched: no bridge, no sysctl, binaries by name.
    monkeypatch.setattr(module, "ensure_bridge", lambda: None)
    monkeypatch.setattr(module, "save_sysctls", lambda: None)
    monkeypatch.setattr(module, "system_binary", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(module, "node_binary", lambda name: f"/cache/{name}")
    monkeypatch.setattr(module, "binary", lambda name: f"/cache/{name}")
    module.RUN_DIR.mkdir(parents=True)
    return module


def test_the_node_is_on_demand_and_starts_after_the_core_api_server(stack: ModuleType) -> None:
    node = stack.GROUPS["node"]
    assert set(node).isdisjoint(stack.CORE)  # neither make test nor the default `up` starts it
    order = stack.resolve(["node"])
    assert set(order) == {*node, "etcd", "apiserver"}
    assert order.index("apiserver") < order.index("node-apiserver") < order.index("kubelet")
    assert order.index("containerd") < order.index("kubelet")
    ports = [port for component in stack.COMPONENTS.values() for port in component.ports]
    assert len(ports) == len(set(ports))
    assert list(stack.COMPONENTS)[-len(node) :] == node  # `down` (reverse order) stops the node first


def test_pods_services_and_the_machine_use_separate_addresses(stack: ModuleType) -> None:
    pods, services = ipaddress.ip_network(stack.POD_CIDR), ipaddress.ip_network(stack.SERVICE_CIDR)
    assert not pods.overlaps(services)
    assert not pods.overlaps(ipaddress.ip_network("192.0.2.0/24"))  # eth0 here
    assert not pods.overlaps(ipaddress.ip_network("10.88.0.0/16"))  # podman's default network
    assert ipaddress.ip_address(stack.NODE_IP) in pods and not ipaddress.ip_address(stack.NODE_IP).is_loopback


def test_containerd_has_its_own_config_root_state_and_socket(stack: ModuleType) -> None:
    command = stack.COMPONENTS["containerd"].prepare()
    config = Path(command[command.index("--config") + 1])
    text = config.read_text()
    assert config.is_relative_to(stack.NODE_DIR) and "/etc/containerd" not in text
    for key in ("root", "state", "address"):
        line = next(line for line in text.splitlines() if line.strip().startswith(f"{key} = "))
        assert str(stack.NODE_DIR) in line, line
    assert f'sandbox_image = "{stack.PAUSE_IMAGE}"' in text  # never pulled: no registry is reachable
    assert "SystemdCgroup = false" in text  # cgroupfs, as kubelet's cgroupDriver
    assert "restrict_oom_score_adj = true" in text  # no CAP_SYS_RESOURCE: runc's init failed without
    assert f'bin_dir = "{stack.cni_bin_dir()}"' in text


def test_the_cni_config_is_a_bridge_on_the_pod_cidr(stack: ModuleType) -> None:
    stack.COMPONENTS["containerd"].prepare()
    conflist = json.loads((stack.NODE_DIR / "cni" / "net.d" / "10-stack.conflist").read_text())
    bridge = conflist["plugins"][0]
    assert (bridge["type"], bridge["bridge"], bridge["isGateway"]) == ("bridge", stack.NODE_BRIDGE, True)
    assert bridge["ipam"]["ranges"] == [[{"subnet": stack.POD_CIDR, "gateway": stack.NODE_IP}]]
    assert Path(bridge["ipam"]["dataDir"]).is_relative_to(stack.NODE_DIR)  # not /var/lib/cni
    assert [plugin["type"] for plugin in conflist["plugins"]] == ["bridge", "portmap"]


def test_kubelet_runs_on_cgroup_v1_without_swap_check_or_image_gc(
    stack: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stack, "image_present", lambda reference: True)
    monkeypatch.setattr(stack, "state", lambda: {"admin_token": "t0k"})
    command = stack.COMPONENTS["kubelet"].prepare()
    config = json.loads(Path(next(a for a in command if a.startswith("--config=")).split("=", 1)[1]).read_text())
    assert config["failCgroupV1"] is False  # kubelet 1.35 refuses cgroup v1 otherwise (KEP-5573)
    assert (config["cgroupDriver"], config["failSwapOn"]) == ("cgroupfs", False)
    assert config["containerRuntimeEndpoint"] == f"unix://{stack.containerd_socket()}"
    assert config["imageGCHighThresholdPercent"] == 100  # imported images cannot be pulled again
    assert config["address"] == stack.NODE_IP and config["readOnlyPort"] == 0
    assert config["registerWithTaints"] == [stack.NODE_TAINT]  # other tests' Deployments stay off it
    assert f"--node-ip={stack.NODE_IP}" in command and f"--hostname-override={stack.NODE_NAME}" in command
    kubeconfig = json.loads(stack.node_kubeconfig_path().read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"] == f"https://{stack.NODE_IP}:26444"
    assert kubeconfig["users"][0]["user"]["token"] == "t0k"


def test_kubelet_imports_the_sandbox_image_only_when_missing(
    stack: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    imported: list[Path] = []
    monkeypatch.setattr(stack, "import_image", imported.append)
    monkeypatch.setattr(stack, "pause_image_archive", lambda: Path("pause.tar"))
    monkeypatch.setattr(stack, "state", lambda: {"admin_token": "t0k"})
    for present in (True, False):
        monkeypatch.setattr(stack, "image_present", lambda reference, present=present: present)
        stack.COMPONENTS["kubelet"].prepare()
    assert imported == [Path("pause.tar")]


def test_the_sandbox_image_is_the_local_pause_binary_in_one_layer(
    stack: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pause = tmp_path / "pause"
    pause.write_bytes(b"\x7fELF static pause")
    monkeypatch.setattr(stack, "node_binary", lambda name: str(pause))
    with tarfile.open(stack.pause_image_archive()) as archive:
        manifest = json.load(archive.extractfile("manifest.json"))  # type: ignore[arg-type]
        config = json.load(archive.extractfile("config.json"))  # type: ignore[arg-type]
        layer = archive.extractfile("layer.tar").read()  # type: ignore[union-attr]
    assert manifest == [{"Config": "config.json", "RepoTags": [stack.PAUSE_IMAGE], "Layers": ["layer.tar"]}]
    assert stack.PAUSE_IMAGE.startswith("localhost/")
    assert config["rootfs"]["diff_ids"] == [f"sha256:{hashlib.sha256(layer).hexdigest()}"]
    assert config["config"]["Entrypoint"] == ["/pause"]
    with tarfile.open(fileobj=io.BytesIO(layer)) as files:
        entry = files.getmember("pause")
        assert entry.mode == 0o755 and files.extractfile(entry).read() == pause.read_bytes()  # type: ignore[union-attr]


def test_the_node_api_server_shares_the_core_keys_and_admits_service_accounts(
    stack: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stack, "state", lambda: {"admin_token": "t0k"})
    (stack.STACK_DIR / "pki").mkdir(parents=True)
    (stack.STACK_DIR / "pki" / "sa.key").write_text("key")
    command = stack.COMPONENTS["node-apiserver"].prepare()
    flags = dict(arg.split("=", 1) for arg in command[1:])
    assert (flags["--bind-address"], flags["--secure-port"]) == (stack.NODE_IP, "26444")
    assert flags["--service-account-key-file"] == str(stack.STACK_DIR / "pki" / "sa.key")
    assert flags["--token-auth-file"] == str(stack.STACK_DIR / "pki" / "tokens.csv")
    assert flags["--service-cluster-ip-range"] == stack.SERVICE_CIDR
    # Its CA is in namespaces' kube-root-ca.crt: kept by `down node` (which removes NODE_DIR).
    assert flags["--cert-dir"] == str(stack.NODE_PKI) and not stack.NODE_PKI.is_relative_to(stack.NODE_DIR)
    assert flags["--endpoint-reconciler-type"] == "none"  # the kubernetes Service's slice is the stack's
    assert "--disable-admission-plugins" not in flags  # ServiceAccount gives Pods their token volume


def test_kube_proxy_is_iptables_on_the_pod_cidr_and_leaves_sysctls(
    stack: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stack, "ensure_kubernetes_endpoints", lambda: None)
    monkeypatch.setattr(stack, "state", lambda: {"admin_token": "t0k"})
    command = stack.COMPONENTS["kube-proxy"].prepare()
    config = json.loads(Path(command[1].split("=", 1)[1]).read_text())
    assert (config["mode"], config["clusterCIDR"]) == ("iptables", stack.POD_CIDR)
    assert config["conntrack"]["maxPerCore"] == 0  # nf_conntrack_max left as it is
    assert config["iptables"]["localhostNodePorts"] is False  # route_localnet left as it is
    assert config["nodePortAddresses"] == [f"{stack.NODE_IP}/32"]


def test_down_leaves_a_stack_without_a_node_alone(stack: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"ran {args}")

    monkeypatch.setattr(stack.subprocess, "run", refuse)
    stack.down_node()
    with pytest.raises(stack.StackError, match="only a group"):
        stack.cmd_down(["kafka-a"])


def test_down_removes_kubelets_chains_and_only_them(stack: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    rules = "\n".join(
        [
            "-P INPUT ACCEPT",
            "-N CNI-FORWARD",
            "-N KUBE-FIREWALL",
            "-N KUBE-KUBELET-CANARY",
            "-A INPUT -j KUBE-FIREWALL",
            '-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD',
            '-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming" -j DROP',
        ]
    )
    calls: list[list[str]] = []

    def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        listing = command[-1] == "-S" and command[0] == "iptables" and command[3] == "filter"
        return subprocess.CompletedProcess(command, 0, rules if listing else "", "")

    monkeypatch.setattr(stack.shutil, "which", lambda name, path=None: name)
    monkeypatch.setattr(stack.subprocess, "run", run)
    stack.remove_kubelet_chains()
    changes = [command[3:] for command in calls if command[-1] != "-S"]
    assert changes == [
        ["filter", "-D", "INPUT", "-j", "KUBE-FIREWALL"],
        ["filter", "-F", "KUBE-FIREWALL"],
        ["filter", "-F", "KUBE-KUBELET-CANARY"],
        ["filter", "-X", "KUBE-FIREWALL"],
        ["filter", "-X", "KUBE-KUBELET-CANARY"],
    ]


def test_the_gateway_forwards_a_port_to_the_same_port_elsewhere() -> None:
    """127.0.0.2 stands for the node's address, 127.0.0.1 for the stack's: bytes go both ways."""
    gateway = load_hack_script("node_gateway")

    async def scenario() -> bytes:
        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"echo:" + await reader.read(100))
            await writer.drain()
            writer.close()

        target = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = target.sockets[0].getsockname()[1]
        serving = asyncio.create_task(gateway.serve("127.0.0.2", "127.0.0.1", [port]))
        try:
            for _ in range(100):
                try:
                    reader, writer = await asyncio.open_connection("127.0.0.2", port)
                    break
                except OSError:
                    await asyncio.sleep(0.02)
            writer.write(b"hello")
            writer.write_eof()
            answer = await asyncio.wait_for(reader.read(), 5)
            writer.close()
            return answer
        finally:
            serving.cancel()
            target.close()

    assert asyncio.run(scenario()) == b"echo:hello"
