"""Small inputs that claim (or expand to) huge sizes, decoded in a child process whose address space is
capped (``RLIMIT_AS`` = what the imports use + 512 MB): each must be refused with a PaimonMetaError, never
a MemoryError or an allocation anywhere near the claim."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.torture.chaos import REPO_ROOT

HEADROOM_MB = 512

_CHILD = textwrap.dedent(
    """
    import json, resource, struct, sys, zlib
    import pyarrow as pa
    from paimon_meta.errors import PaimonMetaError
    from paimon_meta.serde import avro_container as ac
    from paimon_meta.serde.avro import decode_manifest_list, encode_manifest_list
    from paimon_meta.serde.commit_message import deserialize_commit_messages
    from paimon_meta.serde.json import snapshot_from_json

    GiB = 1 << 30

    def container(codec, block, count=1):
        valid = encode_manifest_list([], compression=codec)
        header = ac.read_header(valid)
        return (valid[: header.data_start] + ac._encode_long(count) + ac._encode_long(len(block))
                + block + header.sync)

    def zeros_compressed(compress, total):
        chunk = bytes(64 << 20)
        return b"".join(compress(chunk) for _ in range(total // len(chunk)))

    def deflate_bomb():
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        return container("deflate", zeros_compressed(c.compress, GiB) + c.flush())

    def zstd_bomb():
        sink = pa.BufferOutputStream()
        stream = pa.CompressedOutputStream(sink, "zstd")
        for _ in range(GiB // (64 << 20)):
            stream.write(bytes(64 << 20))
        stream.close()
        return container("zstandard", sink.getvalue().to_pybytes())

    def snappy_claim():
        # a snappy block whose length prefix claims 2^31 - 1 bytes, with 8 bytes of body and a CRC
        body = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x07]) + bytes(8)
        return container("snappy", body + bytes(4))

    CASES = {
        "snappy-length-claim": lambda: (decode_manifest_list, snappy_claim()),
        "deflate-bomb": lambda: (decode_manifest_list, deflate_bomb()),
        "zstd-bomb": lambda: (decode_manifest_list, zstd_bomb()),
        "avro-block-count": lambda: (decode_manifest_list, container("null", b"\\x00", count=2**62)),
        "avro-block-size": lambda: (
            decode_manifest_list,
            encode_manifest_list([], compression="null") + ac._encode_long(1) + ac._encode_long(2**62),
        ),
        "commit-message-count": lambda: (
            lambda d, **kw: deserialize_commit_messages(d, 14, **kw),
            struct.pack(">i", 2**31 - 1) + bytes(64),
        ),
        "commit-message-size": lambda: (
            lambda d, **kw: deserialize_commit_messages(d, 14, **kw),
            struct.pack(">ii", 1, 2**31 - 1) + bytes(64),
        ),
        "json-nesting": lambda: (snapshot_from_json, "[" * 200_000),
        "json-huge-number": lambda: (snapshot_from_json, '{"id": 1' + "0" * 100_000 + "}"),
    }

    decode, data = CASES[sys.argv[1]]()
    vm = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize"))
    limit = vm + int(sys.argv[2]) * (1 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        decode(data, path="bounded")
        outcome = "decoded"
    except PaimonMetaError as e:
        outcome = "typed " + type(e).__name__
    except BaseException as e:
        outcome = "untyped " + type(e).__name__ + ": " + str(e)[:200]
    print(json.dumps({"outcome": outcome}))
    """
)


def _decode_bounded(case: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, case, str(HEADROOM_MB)],
        cwd=REPO_ROOT,
        capture_output=True,
        timeout=240,
        check=False,
    )
    lines = [line for line in proc.stdout.decode().splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stderr.decode()[-3000:]
    outcome: str = json.loads(lines[-1])["outcome"]
    return outcome


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "case",
    [
        "snappy-length-claim",
        "deflate-bomb",
        "zstd-bomb",
        "avro-block-count",
        "avro-block-size",
        "commit-message-count",
        "commit-message-size",
        "json-nesting",
        "json-huge-number",
    ],
)
def test_refused_in_bounded_memory(case: str) -> None:
    outcome = _decode_bounded(case)
    assert outcome.startswith("typed "), f"{case}: {outcome}"
