"""Workers whose user logs in with dash or busybox sh, through real OpenSSH: every value of a sample
of hostile payloads (each field once, each payload class once) reaches the engine byte for byte and
no canary file appears. Rejected payload classes (control characters, line separators) are covered
at compile time (tests/fake_cluster/test_hardening.py, tests/security/)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from simcluster import SimCluster
from simcluster.images import VLLM_IMAGE
from tests.cluster.deployment import Deploy

pytestmark = pytest.mark.cluster


@contextmanager
def login_shell(cluster: SimCluster, node: str, shell: Path, workdir: Path) -> Iterator[None]:
    """root logs in to `node` with `shell`: a copy of /etc/passwd bind-mounted in that node's mount namespace."""
    passwd = workdir / f"passwd-{node}"
    text = Path("/etc/passwd").read_text(encoding="utf-8")
    passwd.write_text(re.sub(r"^(root:(?:[^:]*:){5})[^\n]*$", rf"\g<1>{shell}", text, flags=re.M), encoding="utf-8")
    cluster.exec(node, ["mount", "--bind", str(passwd), "/etc/passwd"], check=True)
    try:
        yield
    finally:
        cluster.exec(node, ["umount", "/etc/passwd"])


def payloads(canary: Path) -> dict[str, str]:
    return {
        "SQUOTE": "it's 'quoted'",
        "DQUOTE": 'say "hi" \\"x\\"',
        "CMDSUB": f"$(touch {canary})",
        "BACKTICK": f"`touch {canary}`",
        "OPERATORS": f"a;b|c&d<e>f && touch {canary} #",
        "NONASCII": "é 日本 🚀 ß",
        "DASH": "--not-a-flag",
        "EQUALS": "a=b=c",
        "GLOB": "* ? [a-z] ..",
        "TILDE": "~/x",
        "BACKSLASH": "C:\\dir\\",
        "DOLLAR": "$HOME ${IFS} $$ $0",
        "LONG": "x" * 4000,
    }


def test_values_arrive_exactly_through_dash_and_busybox_workers(
    deploy: Deploy, sim_cluster: SimCluster, tmp_path: Path
) -> None:
    canary = tmp_path / "canary"
    values = payloads(canary)
    busybox_sh = tmp_path / "bin" / "sh"  # busybox picks its applet by the name it is run as
    busybox_sh.parent.mkdir()
    busybox = shutil.which("busybox")
    if busybox is None:
        pytest.fail("busybox is not installed (simcluster/install.sh installs it)")
    busybox_sh.symlink_to(busybox)
    served = f"modèle 'x' $(touch {canary})"
    secret = f"line one\n'$(touch {canary})'\n\n"
    d = deploy(
        "llama33-70b-2spark-native.yaml",
        "shells",
        {
            "container.image": VLLM_IMAGE,
            "model.architecture": {"attention_heads": 6, "kv_heads": 6},
            "model.name": served,
            "container.env": {f"VALUE_{k}": v for k, v in values.items()},
            "container.secrets": ["HF_TOKEN"],
        },
        nodes=3,
    )
    with (
        login_shell(sim_cluster, "spark2", Path("/bin/dash"), tmp_path),
        login_shell(sim_cluster, "spark3", busybox_sh, tmp_path),
    ):
        for node, shell in (("spark2", "dash"), ("spark3", "busybox")):
            seen = sim_cluster.ssh("spark1", node, "readlink /proc/$$/exe; true", check=True).stdout
            assert shell in seen, seen
        launch = d.run("launch-cluster.sh", env={"HF_TOKEN": secret, "LC_ALL": "C"})
        assert launch.returncode == 0, launch.stdout + launch.stderr
        for node in d.nodes:
            seen = d.standin_env(node)
            for key, value in values.items():
                assert seen["env"][f"VALUE_{key}"] == value, (node, key)
            assert seen["env"]["HF_TOKEN"] == secret, node
            assert served in seen["argv"], node  # one word, as written
        assert d.run("status.sh").returncode == 0
        assert d.run("stop-cluster.sh").returncode == 0
    assert not canary.exists()
