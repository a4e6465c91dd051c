"""A network namespace joined to ours by a veth pair, so a process inside it can be cut off.

``Partition.create()`` makes namespace ``pmchaos-<pid>`` with one end of a veth pair (``ns_ip``) and
keeps the other end here (``host_ip``), a /30 of 10.251.0.0/16 picked from our pid. A process run with
:attr:`Partition.exec_prefix` reaches the host side only through the veth; :meth:`cut` downs our end (its
packets go nowhere, no reset: what a network partition looks like to both sides), :meth:`restore` brings
it back. :meth:`close` deletes both (the namespace's end goes with the namespace).

Needs root and ``ip`` (iproute2) with namespace support: :func:`require_namespaces` skips with the
reason otherwise (this part of the chaos tests is optional where containers forbid namespaces).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass

import pytest

IP = shutil.which("ip") or "/usr/sbin/ip"


class NamespaceError(Exception):
    """An ``ip`` command failed; the message carries its output."""


def _ip(*args: str) -> None:
    result = subprocess.run([IP, *args], capture_output=True, text=True, timeout=30, check=False)
    if result.returncode != 0:
        raise NamespaceError(f"ip {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")


@dataclass
class Partition:
    name: str
    host_if: str
    ns_if: str
    host_ip: str
    ns_ip: str

    @property
    def network(self) -> str:
        return f"{self.host_ip.rsplit('.', 1)[0]}.{int(self.host_ip.rsplit('.', 1)[1]) - 1}/30"

    @property
    def exec_prefix(self) -> list[str]:
        return [IP, "netns", "exec", self.name]

    @classmethod
    def create(cls) -> Partition:
        pid = os.getpid()
        block = (pid % 16000) * 4  # a /30 of 10.251.0.0/16 (64k addresses, 16k blocks)
        base = f"10.251.{block // 256}.{block % 256}"
        prefix = base.rsplit(".", 1)[0]
        last = int(base.rsplit(".", 1)[1])
        p = cls(
            name=f"pmchaos-{pid}",
            host_if=f"pmc{pid % 100000}h",
            ns_if=f"pmc{pid % 100000}n",
            host_ip=f"{prefix}.{last + 1}",
            ns_ip=f"{prefix}.{last + 2}",
        )
        try:
            _ip("netns", "add", p.name)
            _ip("link", "add", p.host_if, "type", "veth", "peer", "name", p.ns_if)
            _ip("link", "set", p.ns_if, "netns", p.name)
            _ip("addr", "add", f"{p.host_ip}/30", "dev", p.host_if)
            _ip("link", "set", p.host_if, "up")
            _ip("netns", "exec", p.name, IP, "addr", "add", f"{p.ns_ip}/30", "dev", p.ns_if)
            _ip("netns", "exec", p.name, IP, "link", "set", p.ns_if, "up")
            _ip("netns", "exec", p.name, IP, "link", "set", "lo", "up")
        except BaseException:
            p.close()
            raise
        return p

    def cut(self) -> None:
        _ip("link", "set", self.host_if, "down")

    def restore(self) -> None:
        _ip("link", "set", self.host_if, "up")

    def close(self) -> None:
        with contextlib.suppress(NamespaceError):
            _ip("link", "del", self.host_if)
        with contextlib.suppress(NamespaceError):
            _ip("netns", "del", self.name)


def require_namespaces() -> Partition:
    """A new :class:`Partition`, or skip with the reason it cannot be made here."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    if not os.path.exists(IP):
        pytest.skip(f"no {IP} (iproute2) for network namespaces")
    try:
        return Partition.create()
    except NamespaceError as e:
        pytest.skip(f"network namespaces unavailable: {e}")
