"""Shared helpers for benchmarks: machine description, a process's CPU time, the stack's API
client, and section replacement in bench/README.md.

Each benchmark owns one section delimited by ``<!-- bench:NAME:start -->`` / ``<!-- bench:NAME:end -->``
so benchmarks can be re-run one at a time without clobbering each other's results.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

README = Path(__file__).with_name("README.md")


def machine() -> str:
    """One line naming the machine a result was measured on."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    # BENCH_COMMIT: the commit measured when it is not the working tree's (a clean export of it on
    # PYTHONPATH, while others' uncommitted changes are in the tree), e.g. "92874a7 (operator/src)".
    commit = os.environ.get("BENCH_COMMIT") or (
        subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    )
    return (
        f"{os.cpu_count()} cores ({cpu}), {mem_gib:.0f} GiB, Python {platform.python_version()}, "
        f"commit {commit or 'unknown'}, {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}"
    )


def stat_cpu_seconds(stat: Path) -> float:
    """utime + stime (seconds) from a /proc ``stat`` file (a process's covers all its threads). The
    fields are counted after the last ")": the command name in parentheses may hold spaces."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """CPU seconds process ``pid`` has used so far."""
    return stat_cpu_seconds(Path(f"/proc/{pid}/stat"))


def write_section(name: str, body: str) -> None:
    """Replace (or append) benchmark ``name``'s section in bench/README.md."""
    start, end = f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"
    section = f"{start}\n{body.strip()}\n{end}"
    text = README.read_text()
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip() + "\n\n" + section + "\n"
    README.write_text(text)


def stack_api(connections: int) -> tuple[dict[str, Any], Any]:
    """The local stack (CRDs installed) and an admin API client with ``connections`` pooled
    connections (a benchmark's threads each hold one); urllib3's TLS warnings silenced."""
    import urllib3
    from kubernetes import client, config
    from tests.conftest import install_crds, stack_info

    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    info = stack_info()
    install_crds(info)
    configuration = client.Configuration()
    config.load_kube_config(config_file=info["kubeconfig"], client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.connection_pool_maxsize = connections
    return info, client.ApiClient(configuration)
