"""Test images, built offline and cached per machine, written straight in ``docker save`` format.

The base layer is a debootstrap'd Debian (the libraries Ray and torch need, no Python); each image
adds one small layer of shims. Writing the archive ourselves (instead of ``docker import``) gives
the same image ID on every node and on every load, which is what sparkc's image-consistency check
compares; the base layer tar is built once and cached, keyed by a hash of its inputs.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import platform
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from . import shims
from .runtime import LITELLM_VENV, VENV, _venv_home

CACHE = Path(os.environ.get("SPARKC_SIM_CACHE", "/var/cache/sparkc-sim"))
SUITE = "bookworm"
BASE_PACKAGES = (
    "libssl3",  # without it Ray's dashboard agent dies and `ray start` times out
    "libffi8",
    "libbz2-1.0",
    "liblzma5",
    "libsqlite3-0",
    "libreadline8",
    "zlib1g",
    "libnuma1",
    "procps",
    "iproute2",
    "curl",
    "ca-certificates",
    # mpirun in the containers, over ssh between them (the TensorRT-LLM image: backend mpi)
    "openmpi-bin",
    "openssh-server",
    "openssh-client",
)
BUILD_VERSION = "1"  # bump to rebuild every cached base layer
FIXED_MTIME = 1767225600  # 2026-01-01: shim layers are byte-identical from run to run
CREATED = "2026-01-01T00:00:00Z"

VLLM_IMAGE = "sparkc-sim/vllm:test"
NORAY_IMAGE = "sparkc-sim/vllm-noray:test"
HELLOHAL_IMAGE = "sparkc-sim/hellohal:test"
TRTLLM_IMAGE = "sparkc-sim/trtllm:test"
# The TensorRT-LLM image as NVIDIA's two-Spark playbook uses it: built FROM it with openssh-server installed.
TRTLLM_SSHD_IMAGE = "sparkc-sim/trtllm-sshd:test"
# The gateway's LiteLLM proxy, modelled on its release image: WORKDIR /app, ENTRYPOINT docker/prod_entrypoint.sh
# (which runs `litellm` with the command's words), CMD --port 4000; LiteLLM itself from a host venv.
LITELLM_IMAGE = "sparkc-sim/litellm:test"
IMAGES = (VLLM_IMAGE, NORAY_IMAGE, HELLOHAL_IMAGE, TRTLLM_IMAGE, TRTLLM_SSHD_IMAGE, LITELLM_IMAGE)
# The NCCL release each variant carries (as `ncclGetVersion` would report it; the stand-in reads it from
# /etc/sparkc-sim/nccl-version, a test from the image's label): older than 2.30.7 ignores
# NCCL_IB_SUBNET_AWARE_ROUTING.
NCCL_RELEASES = {"vllm": "2.30.7", "vllm-noray": "2.27.7", "hellohal": "2.27.7", "trtllm": "2.27.7"}
NCCL_LABEL = "org.sparkc.sim.nccl"
SSHD = "usr/sbin/sshd"  # OpenSSH's server in the base layer; the TensorRT-LLM image lacks it

Log = Callable[[str], None]


@dataclass(frozen=True)
class Layer:
    diff_id: str  # "sha256:<hex>" of the uncompressed layer tar
    size: int
    path: Path | None = None  # cached file, or
    data: bytes | None = None  # small in-memory layer

    @property
    def hex(self) -> str:
        return self.diff_id.split(":", 1)[1]

    def open(self) -> BinaryIO:
        if self.data is not None:
            return io.BytesIO(self.data)
        assert self.path is not None
        return self.path.open("rb")


@dataclass(frozen=True)
class Image:
    tag: str
    layers: tuple[Layer, ...]
    config: bytes  # the exact bytes docker hashes into the image ID

    @property
    def id(self) -> str:
        return "sha256:" + hashlib.sha256(self.config).hexdigest()


# --------------------------------------------------------------------------- base layer


def apt_mirror() -> str:
    """The Debian mirror apt uses here (debootstrap must use the same one to reach it)."""
    deb822 = Path("/etc/apt/sources.list.d/debian.sources")
    if deb822.exists():
        for stanza in deb822.read_text().split("\n\n"):
            pairs = (ln.partition(":") for ln in stanza.splitlines() if not ln.startswith("#"))
            fields = {k.strip(): v.strip() for k, _, v in pairs}
            if SUITE in fields.get("Suites", "").split() and fields.get("URIs"):
                return fields["URIs"].split()[0]
    legacy = Path("/etc/apt/sources.list")
    if legacy.exists():
        for line in legacy.read_text().splitlines():
            words = line.split()
            if len(words) >= 3 and words[0] == "deb" and words[2] == SUITE:
                return words[1]
    return "http://deb.debian.org/debian"


def base_key() -> str:
    inputs = {
        "suite": SUITE,
        "packages": BASE_PACKAGES,
        "mirror": apt_mirror(),
        "version": BUILD_VERSION,
        "arch": platform.machine(),
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


@contextmanager
def _cache_lock(cache: Path) -> Iterator[None]:
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # two test runs on one machine must not build at once
        yield


def build_base(cache: Path = CACHE, log: Log = print) -> Layer:
    """The debootstrap'd root file system as one layer tar; cached in ``cache/base-<key>``."""
    final = cache / f"base-{base_key()}"
    with _cache_lock(cache):
        meta_path = final / "meta.json"
        if meta_path.exists() and (final / "layer.tar").exists():
            meta = json.loads(meta_path.read_text())
            return Layer(meta["diff_id"], meta["size"], path=final / "layer.tar")
        work = cache / f".build-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        try:
            start = time.monotonic()
            rootfs = work / "rootfs"
            log(f"debootstrap {SUITE} (minbase + {len(BASE_PACKAGES)} packages) from {apt_mirror()} ...")
            subprocess.run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    "--include=" + ",".join(BASE_PACKAGES),
                    SUITE,
                    str(rootfs),
                    apt_mirror(),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=1200,
            )
            _slim(rootfs)
            diff_id, size = _tar_dir(rootfs, work / "layer.tar")
            shutil.rmtree(rootfs)
            seconds = round(time.monotonic() - start, 1)
            meta = {
                "diff_id": diff_id,
                "size": size,
                "suite": SUITE,
                "packages": list(BASE_PACKAGES),
                "mirror": apt_mirror(),
                "build_seconds": seconds,
            }
            (work / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
            shutil.rmtree(final, ignore_errors=True)
            work.rename(final)
            log(f"base layer built in {seconds} s: {size / 1e6:.0f} MB, {diff_id[:19]}")
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"debootstrap failed: {exc.stderr.decode(errors='replace')[-2000:]}") from exc
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return Layer(diff_id, size, path=final / "layer.tar")


def _slim(rootfs: Path) -> None:
    # Documentation, man pages, translations and apt's caches are dead weight in every node's store.
    for rel in (
        "usr/share/doc",
        "usr/share/man",
        "usr/share/info",
        "usr/share/locale",
        "var/cache/apt",
        "var/lib/apt/lists",
        "var/cache/debconf",
    ):
        target = rootfs / rel
        if target.is_dir():
            for child in target.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()


def _tar_dir(rootfs: Path, out: Path) -> tuple[str, int]:
    """GNU tar of the tree (numeric owners, device nodes left out), hashed while written."""
    argv = [
        "tar",
        "-C",
        str(rootfs),
        "--numeric-owner",
        "--sort=name",
        "--exclude=./dev/*",
        "--exclude=./proc/*",
        "--exclude=./sys/*",
        "--exclude=./run/*",
        "--exclude=./tmp/*",
        "-cf",
        "-",
        ".",
    ]
    digest = hashlib.sha256()
    size = 0
    with subprocess.Popen(argv, stdout=subprocess.PIPE) as proc, out.open("wb") as fh:
        assert proc.stdout is not None
        while chunk := proc.stdout.read(1 << 20):
            digest.update(chunk)
            fh.write(chunk)
            size += len(chunk)
    if proc.returncode != 0:
        raise RuntimeError(f"tar of {rootfs} failed with exit code {proc.returncode}")
    return "sha256:" + digest.hexdigest(), size


# --------------------------------------------------------------------------- shim layers and images


def _tar_files(files: dict[str, tuple[int, str]]) -> Layer:
    """A small deterministic layer from {path: (mode, content)}; parent directories included."""
    buf = io.BytesIO()
    dirs = sorted({str(Path(p).parents[i]) for p in files for i in range(len(Path(p).parents) - 1)})
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for d in dirs:
            info = tarfile.TarInfo(d + "/")
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, FIXED_MTIME
            tar.addfile(info)
        for path in sorted(files):
            mode, content = files[path]
            data = content.encode()
            info = tarfile.TarInfo(path)
            info.mode, info.size, info.mtime = mode, len(data), FIXED_MTIME
            tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    return Layer("sha256:" + hashlib.sha256(raw).hexdigest(), len(raw), data=raw)


def _arch() -> str:
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def _image(
    tag: str,
    layers: tuple[Layer, ...],
    entrypoint: list[str] | None,
    label: str,
    history: list[str],
    workdir: str = "/",
    cmd: list[str] | None = None,
) -> Image:
    labels = {"org.sparkc.sim.variant": label}
    if label in NCCL_RELEASES:
        labels[NCCL_LABEL] = NCCL_RELEASES[label]
    config = {
        "architecture": _arch(),
        "os": "linux",
        "created": CREATED,
        "config": {
            "Env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "LANG=C.UTF-8",
                # Ray would try to report usage to the internet; the nodes have no route out anyway.
                "RAY_USAGE_STATS_ENABLED=0",
            ],
            "Entrypoint": entrypoint,
            "Cmd": cmd,
            "WorkingDir": workdir,
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        "history": [{"created": CREATED, "created_by": h} for h in history],
    }
    raw = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    return Image(tag, layers, raw)


def ensure_images(venv: Path = VENV, cache: Path = CACHE, log: Log = print) -> dict[str, Image]:
    """Builds (or finds cached) the base layer and returns the test images by tag."""
    base = build_base(cache, log)
    python_home = str(_venv_home(venv))
    out: dict[str, Image] = {}
    variants = (
        (VLLM_IMAGE, "vllm"),
        (NORAY_IMAGE, "vllm-noray"),
        (HELLOHAL_IMAGE, "hellohal"),
        (TRTLLM_IMAGE, "trtllm"),
    )
    for tag, variant in variants:
        files = shims.variant_files(variant, str(venv), python_home)
        files["etc/sparkc-sim/nccl-version"] = (0o644, NCCL_RELEASES[variant] + "\n")
        if variant == "trtllm":  # built without openssh-server, as NGC's TensorRT-LLM image can be
            files.update(_openssh_server(base, cache).removed())
        layer = _tar_files(files)
        entrypoint = ["/app/entrypoint.sh"] if variant == "hellohal" else None
        out[tag] = _image(
            tag,
            (base, layer),
            entrypoint,
            variant,
            [f"debootstrap --variant=minbase {SUITE}", f"sparkc-sim shims ({variant})"],
        )
    out[TRTLLM_SSHD_IMAGE] = _with_sshd(out[TRTLLM_IMAGE], base, cache)
    out[LITELLM_IMAGE] = litellm_image(base)
    return out


def litellm_image(base: Layer, venv: Path = LITELLM_VENV) -> Image:
    """LiteLLM's proxy as its release image starts it, `litellm` taken from `venv` (mounted read-only at its own
    path, with the interpreter it was made from: simcluster.container_mounts(LITELLM_VENV))."""
    entrypoint = (
        "#!/bin/sh\n"
        "# sparkc-sim copy of LiteLLM's docker/prod_entrypoint.sh: the proxy, with the command's words.\n"
        f"if [ ! -x {venv}/bin/litellm ]; then\n"
        f"  echo 'sparkc-sim: {venv} (simcluster/install.sh makes it) must be mounted read-only here' >&2\n"
        "  exit 127\n"
        "fi\n"
        f'exec {venv}/bin/litellm "$@"\n'
    )
    layer = _tar_files({"app/docker/prod_entrypoint.sh": (0o755, entrypoint)})
    history = [f"debootstrap --variant=minbase {SUITE}", "sparkc-sim LiteLLM entrypoint"]
    entry, cmd = ["docker/prod_entrypoint.sh"], ["--port", "4000"]
    return _image(LITELLM_IMAGE, (base, layer), entry, "litellm", history, workdir="/app", cmd=cmd)


def _with_sshd(image: Image, base: Layer, cache: Path) -> Image:
    """FROM the image, RUN apt-get install openssh-server: one more layer holding sshd and dpkg's record of the
    package (taken from the base layer, where debootstrap installed it; the nodes have no mirror)."""
    package = _openssh_server(base, cache)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path, mode, data in ((SSHD, 0o755, package.sshd), (DPKG_STATUS, 0o644, package.status.encode())):
            info = tarfile.TarInfo(path)
            info.mode, info.size, info.mtime = mode, len(data), FIXED_MTIME
            tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    layer = Layer("sha256:" + hashlib.sha256(raw).hexdigest(), len(raw), data=raw)
    config = json.loads(image.config)
    config["rootfs"]["diff_ids"].append(layer.diff_id)
    config["history"].append({"created": CREATED, "created_by": "RUN apt-get install -y openssh-server"})
    raw_config = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    return Image(TRTLLM_SSHD_IMAGE, (*image.layers, layer), raw_config)


DPKG_STATUS = "var/lib/dpkg/status"
DPKG_INFO = "var/lib/dpkg/info/"


@dataclass(frozen=True)
class OpensshServer:
    """What the base layer holds of the openssh-server package."""

    sshd: bytes
    status: str  # dpkg's status file, the package in it
    info: tuple[str, ...]  # dpkg's files about the package (openssh-server.list, .postinst, ...)

    def removed(self) -> dict[str, tuple[int, str]]:
        """A layer's files that make the package absent, as in an image built without it: whiteouts for sshd
        and dpkg's files of the package, and dpkg's status without its entry (apt then has it to install)."""
        entries = [e for e in self.status.split("\n\n") if "Package: openssh-server\n" not in e + "\n"]
        files = {DPKG_STATUS: (0o644, "\n\n".join(entries))}
        for path in (SSHD, *self.info):
            files[str(Path(path).parent / f".wh.{Path(path).name}")] = (0o644, "")
        return files


def _openssh_server(base: Layer, cache: Path) -> OpensshServer:
    """Read once from the base layer's tar and kept beside it."""
    kept = cache / f"openssh-server-{base.hex[:16]}"
    if not (kept / "info.json").exists():
        found: dict[str, bytes] = {}
        info: list[str] = []
        with base.open() as fh, tarfile.open(fileobj=fh, mode="r|") as tar:
            for member in tar:
                name = member.name.removeprefix("./")
                if name.startswith(DPKG_INFO + "openssh-server."):
                    info.append(name)
                if name in (SSHD, DPKG_STATUS) and member.isfile():
                    extracted = tar.extractfile(member)
                    assert extracted is not None
                    found[name] = extracted.read()
        if set(found) != {SSHD, DPKG_STATUS}:
            raise RuntimeError(f"no {SSHD} in the base layer: openssh-server must be among BASE_PACKAGES")
        work = kept.with_name(kept.name + f".{os.getpid()}")
        work.mkdir(parents=True, exist_ok=True)
        (work / "sshd").write_bytes(found[SSHD])
        (work / "status").write_bytes(found[DPKG_STATUS])
        (work / "info.json").write_text(json.dumps(sorted(info)))
        shutil.rmtree(kept, ignore_errors=True)
        work.rename(kept)
    return OpensshServer(
        (kept / "sshd").read_bytes(),
        (kept / "status").read_text(encoding="utf-8"),
        tuple(json.loads((kept / "info.json").read_text())),
    )


def swapped_image(image: Image, marker: str, files: dict[str, tuple[int, str]] | None = None) -> Image:
    """Same tag, one extra layer: a different image ID (DOMAIN: F14); `files` ({path: (mode, content)})
    replaced in it change its behaviour too (an entrypoint that reads other variables)."""
    extra = _tar_files({"etc/sparkc-sim/rebuild": (0o644, marker + "\n"), **(files or {})})
    config = json.loads(image.config)
    config["rootfs"]["diff_ids"].append(extra.diff_id)
    config["history"].append({"created": CREATED, "created_by": f"sparkc-sim rebuild {marker}"})
    raw = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    return Image(image.tag, (*image.layers, extra), raw)


# --------------------------------------------------------------------------- docker save format


def write_archive(out: IO[bytes], images: Iterable[Image]) -> None:
    """Streams a ``docker load``-able tar holding ``images``; shared layers are written once."""
    images = list(images)
    manifest = []
    written: set[str] = set()
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.GNU_FORMAT) as tar:
        for image in images:
            for layer in image.layers:
                if layer.hex in written:
                    continue
                written.add(layer.hex)
                info = tarfile.TarInfo(f"{layer.hex}/layer.tar")
                info.size, info.mtime, info.mode = layer.size, FIXED_MTIME, 0o644
                with layer.open() as fh:
                    tar.addfile(info, fh)
            cfg_name = image.id.split(":", 1)[1] + ".json"
            if cfg_name not in written:
                written.add(cfg_name)
                info = tarfile.TarInfo(cfg_name)
                info.size, info.mtime, info.mode = len(image.config), FIXED_MTIME, 0o644
                tar.addfile(info, io.BytesIO(image.config))
            manifest.append(
                {
                    "Config": cfg_name,
                    "RepoTags": [image.tag],
                    "Layers": [f"{layer.hex}/layer.tar" for layer in image.layers],
                }
            )
        data = json.dumps(manifest).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size, info.mtime, info.mode = len(data), FIXED_MTIME, 0o644
        tar.addfile(info, io.BytesIO(data))


def save_archive(path: Path, images: Iterable[Image]) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as fh:
        write_archive(fh, images)
    tmp.rename(path)
    return path
