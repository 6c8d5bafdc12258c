"""NCCL's bootstrap, as the stand-in's ranks go through it before the weights load.

What NCCL does (src/bootstrap.cc, bootstrapNetInit and bootstrapInit; src/misc/socket.cc): each rank
picks ONE interface from NCCL_SOCKET_IFNAME (`ncclFindInterfaces(..., 1)`: a comma list of name
prefixes, `=` for exact names, `^` to exclude; loopback only when named) and listens on its address.
Rank 0's address travels in the unique id (through torch's store); every other rank connects to it,
then to the next rank's listener, which forms the bootstrap ring. A connect that is refused or times
out is retried; any other error (no route to the address) fails at once as
`socketStartConnect: Connect to ADDR<PORT> failed : <strerror>`. On a mesh or ring without a switch a
CX-7 address reaches one neighbour only, so a rank not cabled to rank 0 fails here.

The addresses are exchanged over the gloo group the stand-in already formed (standing in for the
unique id and the root's relay); the connections themselves are real TCP over the nodes' interfaces.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import struct
import threading
import time

from . import log
from .dist import DistError

SIOCGIFADDR = 0x8915
# Where the image keeps its NCCL release (simcluster/images.py), as ncclGetVersion would report it.
NCCL_VERSION_FILE = "/etc/sparkc-sim/nccl-version"
# The parameters NCCL reads from the environment, by the release that first reads each.
NCCL_PARAMS_FROM = {"NCCL_IB_SUBNET_AWARE_ROUTING": (2, 30, 7), "NCCL_IB_SUBNET_PREFIX_LEN": (2, 30, 7)}


def nccl_release(path: str = NCCL_VERSION_FILE) -> str:
    """The image's NCCL release; "" where the image does not say."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in text.split("."))


def nccl_reads(release: str, env: dict[str, str]) -> dict[str, str]:
    """The parameters of NCCL_PARAMS_FROM this release reads from `env` (an older one ignores them, silently,
    as NCCL does with any variable it does not know)."""
    have = _version(release) if release else ()
    return {name: env[name] for name, first in NCCL_PARAMS_FROM.items() if name in env and have >= first}


RETRY_ERRNOS = (errno.ECONNREFUSED, errno.ETIMEDOUT, errno.EINTR)


def ipv4_address(ifname: str) -> str | None:
    """The interface's IPv4 address, or None when it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            data = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", ifname[:15].encode()))
        except OSError:
            return None
    return socket.inet_ntoa(data[20:24])


def _matches(name: str, spec: str) -> bool:
    """NCCL's interface filter: a list of prefixes, `=` exact, `^` exclude (of either kind)."""
    exclude = spec.startswith("^")
    body = spec[1:] if exclude else spec
    exact = body.startswith("=")
    words = [w for w in (body[1:] if exact else body).split(",") if w]
    hit = any(name == w if exact else name.startswith(w) for w in words)
    return not hit if exclude else hit


def find_interface(spec: str) -> tuple[str, str] | None:
    """The one interface NCCL's bootstrap would listen on: the first (by index) that matches and has an
    IPv4 address. Without a spec NCCL prefers ib*, then anything but docker* and lo."""
    names = [name for _, name in socket.if_nameindex()]
    if spec:
        candidates = [n for n in names if _matches(n, spec) and (n != "lo" or "lo" in spec)]
    else:
        candidates = [n for n in names if n.startswith("ib")] + [
            n for n in names if not n.startswith(("ib", "docker", "lo"))
        ]
    for name in candidates:
        address = ipv4_address(name)
        if address:
            return name, address
    return None


def _connect(address: str, port: int, deadline: float) -> socket.socket:
    while True:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(max(0.5, min(5.0, deadline - time.monotonic())))
        try:
            s.connect((address, port))
            return s
        except OSError as exc:
            s.close()
            code = exc.errno if exc.errno is not None else errno.ETIMEDOUT
            if code not in RETRY_ERRNOS and not isinstance(exc, TimeoutError):
                log.warning(f"NCCL WARN socketStartConnect: Connect to {address}<{port}> failed : {os.strerror(code)}")
                raise DistError(
                    f"NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details): "
                    f"socketStartConnect: Connect to {address}<{port}> failed : {os.strerror(code)}"
                ) from exc
            if time.monotonic() >= deadline:
                raise DistError(
                    f"NCCL error: remote process exited or there was a network error: "
                    f"socketStartConnect: exceeded timeouts connecting to {address}<{port}>"
                ) from exc
            time.sleep(0.2)


def bootstrap(rank: int, world: int, timeout_s: float) -> None:
    """Every rank connects to rank 0 and to the next rank, over the interface NCCL_SOCKET_IFNAME picks."""
    import torch.distributed as dist

    spec = os.environ.get("NCCL_SOCKET_IFNAME", "")
    found = find_interface(spec)
    if found is None:
        log.warning("NCCL WARN Bootstrap : no socket interface found")
        raise DistError("NCCL error: invalid usage: Bootstrap : no socket interface found")
    ifname, address = found
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((address, 0))
    listener.listen(world + 1)
    port = listener.getsockname()[1]
    release = nccl_release()
    read = nccl_reads(release, dict(os.environ))
    if release:
        log.info(f"NCCL INFO NCCL version {release}+cuda13.0")
    for name, value in sorted(read.items()):
        log.info(f"NCCL INFO {name} set by environment to {value}")
    log.marker("SPARKC_STANDIN_NCCL", {"rank": rank, "version": release, "reads": sorted(read)})
    log.info(f"NCCL INFO Bootstrap: Using {ifname}:{address}<{port}>")
    threading.Thread(target=_accept_all, args=(listener,), daemon=True).start()

    peers: list[object] = [None] * world
    dist.all_gather_object(peers, (address, port))
    deadline = time.monotonic() + timeout_s
    targets = ([0] if rank != 0 else []) + ([(rank + 1) % world] if world > 1 else [])
    try:
        for peer in dict.fromkeys(targets):
            peer_address, peer_port = peers[peer]  # type: ignore[misc]
            _connect(peer_address, peer_port, deadline).close()
    finally:
        # Keep listening until every rank has made its connections (or found why it cannot).
        _barrier()
        listener.close()
    log.marker("SPARKC_STANDIN_NCCL_BOOTSTRAP", {"rank": rank, "ifname": ifname, "address": address})


def _barrier() -> None:
    import torch.distributed as dist

    try:
        dist.barrier()
    except Exception as exc:  # a peer died before it got here: its own log says why
        log.warning(f"NCCL bootstrap: a peer rank is gone ({exc})")


def _accept_all(listener: socket.socket) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        conn.close()
