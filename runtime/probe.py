"""sparkc fabric probe: one short all-reduce across every node, before the engine's long load.

Run once per node inside the deployment's image, with its environment and torchrun-style variables
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK). Prints one line per rank:
    SPARKC_PROBE {"rank": 0, "transport": "IB", "busbw_gbps": 21.3, ...}
The transport is what NCCL says it used (its INFO lines); Gloo is TCP. The program ends by itself
within SPARKC_PROBE_TIMEOUT seconds, whatever the network does: a probe must never hang a launch.
"""

import json
import os
import re
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

TIMEOUT = int(os.environ.get("SPARKC_PROBE_TIMEOUT", "60"))
RANK = int(os.environ.get("RANK", "0"))
# NCCL writes its INFO lines here (%h host, %p pid are NCCL's own placeholders): read back below.
NCCL_LOG_DIR = Path(tempfile.gettempdir())
NCCL_LOG_STEM = "sparkc-probe-nccl"


def report(**fields):
    fields.setdefault("rank", RANK)
    fields.setdefault("host", socket.gethostname())
    print("SPARKC_PROBE " + json.dumps(fields, sort_keys=True), flush=True)


def on_timeout():
    report(ok=False, error=f"no result within {TIMEOUT} s: a rank is unreachable or the fabric blocks the probe")
    os._exit(3)


def nccl_transport(text):
    """(transport, channel kinds) from NCCL's INFO lines. Channel lines name what really carries the
    data (`via NET/IB/0`, `via NET/Socket/0`, `via P2P/CUMEM`, `via SHM/direct`); `Using network X`
    only says which network plugin was loaded."""
    kinds = sorted(set(re.findall(r"via ((?:NET/[A-Za-z]+)|P2P|SHM|CollNet[A-Za-z]*)", text)))
    if "NET/IB" in kinds:
        return "IB", kinds
    if "NET/Socket" in kinds:
        return "Socket", kinds
    if kinds:
        return kinds[0], kinds  # one host: P2P or SHM, no network at all
    used = re.search(r"Using network ([A-Za-z]+)", text)
    return (used.group(1) if used else "unknown"), kinds


def own_nccl_log():
    """This process's NCCL INFO lines (then the file goes); the transport lines are echoed for the operator."""
    text = ""
    for path in NCCL_LOG_DIR.glob(f"{NCCL_LOG_STEM}.*.{os.getpid()}.log"):
        text += path.read_text(errors="replace")
        path.unlink()
    for line in text.splitlines():
        if re.search(r"via NET/|Using network|NET/Socket : Using|NET/IB : Using", line):
            print(line.strip(), file=sys.stderr)
    return text


def main():
    # A thread, not SIGALRM: a signal handler waits for the main thread to leave C++ code, and a
    # rendezvous that never completes does not leave it (torch's waits release the GIL).
    watchdog = threading.Timer(TIMEOUT, on_timeout)
    watchdog.daemon = True
    watchdog.start()
    # Only what the probe needs to read; set before NCCL initialises.
    os.environ["NCCL_DEBUG"] = "INFO"
    os.environ["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
    os.environ["NCCL_DEBUG_FILE"] = str(NCCL_LOG_DIR / (NCCL_LOG_STEM + ".%h.%p.log"))
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    backend = os.environ.get("SPARKC_PROBE_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    size = int(os.environ.get("SPARKC_PROBE_BYTES") or (256 << 20 if backend == "nccl" else 16 << 20))
    iters = int(os.environ.get("SPARKC_PROBE_ITERS", "5"))
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, rank=RANK, world_size=world, timeout=timedelta(seconds=TIMEOUT))
    data = torch.ones(size // 4, dtype=torch.float32, device=device)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(2):  # connections are set up lazily: keep them out of the timing
        dist.all_reduce(data)
    sync()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(data)
    sync()
    seconds = (time.perf_counter() - start) / iters
    algbw = size / seconds / 1e9
    # Bus bandwidth as nccl-tests defines it for all-reduce: what each link carried.
    busbw = algbw * 2 * (world - 1) / world if world > 1 else algbw
    if backend == "nccl":
        transport, channels = nccl_transport(own_nccl_log())
    else:
        transport, channels = "TCP", []
    dist.destroy_process_group()
    report(
        ok=True,
        world=world,
        backend=backend,
        transport=transport,
        channels=channels,
        device=str(device),
        bytes=size,
        seconds=round(seconds, 6),
        algbw_gbps=round(algbw, 3),
        busbw_gbps=round(busbw, 3),
        torch=torch.__version__,
        nccl=".".join(map(str, torch.cuda.nccl.version())) if backend == "nccl" else "",
    )


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # every failure becomes one line the launcher can show
        report(ok=False, error=f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
        sys.exit(1)
