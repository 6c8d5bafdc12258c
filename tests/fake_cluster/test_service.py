"""The systemd unit that brings a deployment back after a reboot, and install-service.sh, which installs
it on the head: verified by systemd-analyze as systemd itself reads it, installed into a folder standing
for / (systemctl faked), and removed again."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.fakes.cluster import FakeCluster
from tests.product import needs

SOLO = "solo-qwen3-32b.yaml"
UNIT = "sparkc-qwen3-32b.service"
WATCH_UNIT = "sparkc-qwen3-32b-watch.service"
SYSTEM_UNITS = Path("/usr/lib/systemd/system")  # the targets the unit names (network-online, docker's)


def unit_text(fake: FakeCluster, unit: str = UNIT) -> str:
    return (fake.build / "systemd" / unit).read_text()


def verify(root: Path, unit: Path) -> subprocess.CompletedProcess[str]:
    """systemd-analyze verify, as on the head: `root` stands for /, with the system's own units in it."""
    needs(
        shutil.which("systemd-analyze") is None or not SYSTEM_UNITS.is_dir(),
        "needs systemd-analyze (apt install systemd)",
    )
    units = root / "usr/lib/systemd/system"
    if not units.exists():
        shutil.copytree(SYSTEM_UNITS, units, symlinks=True)
    return subprocess.run(
        ["systemd-analyze", f"--root={root}", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )


def test_the_unit_runs_the_launch_once_after_network_and_docker_with_bounded_restarts(fake: FakeCluster) -> None:
    fake.prepare(SOLO)
    unit = unit_text(fake)
    for line in (
        "After=network-online.target docker.service",
        "Wants=network-online.target docker.service",
        "Type=oneshot",
        "RemainAfterExit=yes",
        "ExecStart=/etc/sparkc/deployments/qwen3-32b/launch-cluster.sh --yes",
        "ExecStop=/etc/sparkc/deployments/qwen3-32b/stop-cluster.sh",
        "Restart=on-failure",
        "StartLimitBurst=3",
        "WantedBy=multi-user.target",
    ):
        assert line in unit.splitlines(), line
    # systemd never kills a launch within its budget (120 s here), and the rate limit spans a whole burst
    assert "TimeoutStartSec=420" in unit and "StartLimitIntervalSec=1440" in unit


def test_install_links_the_folder_installs_both_units_systemd_accepts_and_uninstall_removes_them(
    fake: FakeCluster, tmp_path: Path
) -> None:
    fake.prepare(SOLO)
    root = tmp_path / "root"
    (root / "etc/systemd/system").mkdir(parents=True)
    env = {"SPARKC_SYSTEM_ROOT": str(root)}
    installed = fake.run("install-service.sh", "--user", "aurora", env=env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert f"{UNIT} {WATCH_UNIT} enabled, as aurora" in installed.stdout
    link = root / "etc/sparkc/deployments/qwen3-32b"
    assert link.is_symlink() and link.resolve() == fake.build.resolve()
    for unit in (UNIT, WATCH_UNIT):
        assert (root / "etc/systemd/system" / unit).read_text() == unit_text(fake, unit)
        assert (root / f"etc/systemd/system/{unit}.d/user.conf").read_text() == "[Service]\nUser=aurora\n"
    assert [c for c in fake.calls() if c.startswith("systemctl")] == [
        'systemctl ["daemon-reload"]',
        f'systemctl ["enable", "{UNIT}", "{WATCH_UNIT}"]',
    ]
    # what systemd reads on the head: the unit, its drop-in, the scripts it runs through the link (inside
    # the folder that stands for /, so the link points into it)
    shutil.copytree(fake.build, root / "build")
    link.unlink()
    link.symlink_to("../../../build")
    for unit in (UNIT, WATCH_UNIT):
        checked = verify(root, root / "etc/systemd/system" / unit)
        assert checked.returncode == 0 and checked.stdout + checked.stderr == "", checked.stdout + checked.stderr

    removed = fake.run("install-service.sh", "--uninstall", env=env)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    for unit in (UNIT, WATCH_UNIT):
        assert (
            not (root / "etc/systemd/system" / unit).exists() and not (root / f"etc/systemd/system/{unit}.d").exists()
        )
    assert not os_lexists(link)
    assert f'systemctl ["disable", "{UNIT}", "{WATCH_UNIT}"]' in fake.calls()


def test_a_broken_unit_is_what_verify_reports(fake: FakeCluster, tmp_path: Path) -> None:
    """The check above can fail: a unit systemd would not run is reported."""
    fake.prepare(SOLO)
    root = tmp_path / "root"
    unit = root / "etc/systemd/system" / UNIT
    unit.parent.mkdir(parents=True)
    unit.write_text(unit_text(fake).replace("Restart=on-failure", "Restart=sometimes"))
    checked = verify(root, unit)
    assert "Failed to parse service restart specifier, ignoring: sometimes" in checked.stderr, checked.stderr


def test_dry_run_prints_each_step_and_changes_nothing(fake: FakeCluster, tmp_path: Path) -> None:
    fake.prepare(SOLO)
    root = tmp_path / "root"
    dry = fake.run("install-service.sh", "--dry-run", "--user", "aurora", env={"SPARKC_SYSTEM_ROOT": str(root)})
    assert dry.returncode == 0, dry.stderr
    assert f"ln -sfn {fake.build} {root}/etc/sparkc/deployments/qwen3-32b" in dry.stdout
    assert f"systemctl enable {UNIT} {WATCH_UNIT}" in dry.stdout and "User=aurora" in dry.stdout
    assert not root.exists() and not [c for c in fake.calls() if c.startswith("systemctl")]


def test_bad_usage_and_no_permission_are_refused(fake: FakeCluster, tmp_path: Path) -> None:
    fake.prepare(SOLO)
    bad = fake.run("install-service.sh", "--user", "Robert'); rm -rf /")
    assert bad.returncode == 2 and "--user needs a user name" in bad.stderr
    unwritable = fake.run("install-service.sh", env={"SPARKC_SYSTEM_ROOT": str(tmp_path / "nowhere")})
    assert unwritable.returncode == 1 and "run it as root (sudo" in unwritable.stderr


def os_lexists(path: Path) -> bool:
    return path.is_symlink() or path.exists()
