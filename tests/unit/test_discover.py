"""sparkc discover on recorded probe outputs (tests/data/discover/*.out: Sparks as the probe prints them),
through a fake ssh that answers like the real one, and the probe itself under dash and busybox sh."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from compiler.cli.main import cli
from compiler.output.lint import shellcheck_binary
from compiler.pipeline import compile_text
from compiler.resources import data_dir
from compiler.tools import discover as disc
from compiler.tools.probe import NodeFacts, parse
from tests.specs import dump, example, with_changes

DATA = Path(__file__).parent.parent / "data" / "discover"


def _facts(*names: str) -> list[NodeFacts]:
    return [parse(f"10.0.0.{21 + i}", (DATA / f"{name}.out").read_text()) for i, name in enumerate(names)]


def _warnings(choices: list[disc.Choice], name: str) -> str:
    return "\n".join(w for n, w in disc.all_warnings(choices) if n == name)


def test_a_cross_cabled_pair_becomes_a_valid_cluster() -> None:
    choices = disc.choose(_facts("spark-a-both-ports", "spark-b-crosscabled"))
    a, b = choices
    # spark-a has both ports up on four subnets; spark-b shares 192.168.100.0/24 (and .101) with it.
    assert (a.name, a.netdev and a.netdev.name, a.ip, a.hcas) == (
        "spark-a",
        "enp1s0f1np1",
        "192.168.100.10",
        ["roceP2p1s0f1", "rocep1s0f1"],
    )
    assert (b.netdev and b.netdev.name, b.ip, b.hcas) == (
        "enp1s0f0np0",
        "192.168.100.11",
        ["roceP2p1s0f0", "rocep1s0f0"],
    )
    assert "chose enp1s0f1np1" in a.notes[0] and "enp1s0f0np0 (192.168.102.10/24)" in a.notes[0]
    assert "down (not cabled?): enP2p1s0f1np1, enp1s0f1np1" in _warnings(choices, "spark-b")
    assert not _warnings(choices, "spark-a")
    text = disc.to_yaml(choices, disc.SshSettings("aurora"), {})
    spec = example("sglang-qwen3-30b-2spark")
    spec["cluster"] = {"file": "cluster.yaml"}
    assert "RoCE v2 IPv4 GID 3" in text and "# WARNING: down" in text
    _assert_valid(text, spec, expected_ips=["192.168.100.10", "192.168.100.11"])


def _assert_valid(cluster_text: str, spec: dict[str, object], expected_ips: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "cluster.yaml").write_text(cluster_text)
        path = Path(folder) / "spec.yaml"
        path.write_text(dump(spec))
        result = compile_text(path.read_text(), str(path))
        assert result.ok, [d.message for d in result.diagnostics]
        assert result.plan and [n.fabric_ip for n in result.plan.nodes] == expected_ips


def test_json_is_the_same_section() -> None:
    choices = disc.choose(_facts("spark-a-both-ports", "spark-b-crosscabled"))
    data = json.loads(disc.to_json(choices, disc.SshSettings(port=2222)))
    assert data["cluster"]["ssh"] == {"port": 2222}
    assert data["cluster"]["nodes"][1] == {
        "name": "spark-b",
        "ssh": "10.0.0.22",
        "fabric": {
            "ip": "192.168.100.11",
            "netdev": "enp1s0f0np0",
            "hcas": ["roceP2p1s0f0", "rocep1s0f0"],
            "addresses": {"enP2p1s0f0np0": "192.168.101.11"},
        },
        "gpus": 1,
    }


def test_the_twins_addresses_round_trip_through_setup_fabric(tmp_path: Path) -> None:
    """discover prints each twin's own address under fabric.addresses, and setup-fabric keeps it (here not
    the next /24 NVIDIA's rule would give): its second run changes nothing the first did not set."""
    a, b = _facts("spark-a-both-ports", "spark-b-crosscabled")
    # spark-b's twin on 192.168.111.0/24 (its RoCE v2 GID too), not NVIDIA's 192.168.101.11.
    b_text = (DATA / "spark-b-crosscabled.out").read_text()
    b = parse("10.0.0.22", b_text.replace("192.168.101.11/24", "192.168.111.11/24").replace("c0a8:650b", "c0a8:6f0b"))
    choices = disc.choose([a, b])
    assert [c.addresses for c in choices] == [{"enP2p1s0f1np1": "192.168.101.10"}, {"enP2p1s0f0np0": "192.168.111.11"}]
    (tmp_path / "cluster.yaml").write_text(disc.to_yaml(choices, disc.SshSettings("aurora"), {}))
    assert "        addresses: {enP2p1s0f0np0: 192.168.111.11}\n" in (tmp_path / "cluster.yaml").read_text()
    spec = example("sglang-qwen3-30b-2spark")
    spec["cluster"] = {"file": "cluster.yaml"}
    (tmp_path / "spec.yaml").write_text(dump(spec))
    made = CliRunner().invoke(cli, ["setup-fabric", str(tmp_path / "spec.yaml"), "-o", str(tmp_path / "out")])
    assert made.exit_code == 0, made.output
    script = (tmp_path / "out" / "setup-fabric.sh").read_text()
    assert "  [spark-b]='enp1s0f0np0 192.168.100.11/24 enP2p1s0f0np0 192.168.111.11/24'\n" in script
    assert "#   spark-a: enP2p1s0f1np1 192.168.101.10/24 (fabric.addresses)\n" in script
    # A twin on the chosen netdev's own subnet is not printed (the compile would refuse it; discover warns).
    [d] = disc.choose(_facts("spark-d-twins-one-subnet-no-rocev2"))
    assert not d.addresses and "addresses" not in disc.to_yaml([d], disc.SshSettings(), {})


def test_a_mesh_is_discovered_with_both_cables_and_all_four_twins_and_set_up_as_it_is(tmp_path: Path) -> None:
    """Three Sparks cabled to each other on /30s (spark-m*-mesh.out): each node's other cable and both
    ports' twins come under fabric.addresses, the topology and the cables' prefix with them, and
    setup-fabric then sets every netdev to the address it has (a second run changes nothing)."""
    choices = disc.choose(_facts("spark-m1-mesh", "spark-m2-mesh", "spark-m3-mesh"))
    data = disc.section(choices, disc.SshSettings("aurora"))["cluster"]
    assert (data["topology"], data["link_prefix_length"]) == ("mesh", 30)
    assert data["nodes"][1]["fabric"] == {
        "ip": "192.168.100.5",
        "netdev": "enp1s0f0np0",
        "netdevs": ["enp1s0f0np0", "enp1s0f1np1"],
        "hcas": ["roceP2p1s0f0", "roceP2p1s0f1", "rocep1s0f0", "rocep1s0f1"],
        "addresses": {
            "enP2p1s0f0np0": "192.168.101.5",
            "enp1s0f1np1": "192.168.100.2",
            "enP2p1s0f1np1": "192.168.101.2",
        },
    }
    assert not any("shares a subnet with no other node" in w for _, w in disc.all_warnings(choices))
    assert "every node needs control: {netdev: enP7s7" in _warnings(choices, "spark-m1")
    # The operator adds each node's control plane (the 10 GbE, which the probe does not read), then setup-fabric.
    cluster = YAML(typ="safe").load(disc.to_yaml(choices, disc.SshSettings("aurora"), {}))
    for i, node in enumerate(cluster["cluster"]["nodes"]):
        node["control"] = {"netdev": "enP7s7", "ip": f"10.0.0.{10 + i}"}
    spec = with_changes(example("qwen3-32b-3spark-mesh"), {"cluster": cluster["cluster"]})
    (tmp_path / "spec.yaml").write_text(dump(spec))
    made = CliRunner().invoke(cli, ["setup-fabric", str(tmp_path / "spec.yaml"), "-o", str(tmp_path / "out")])
    assert made.exit_code == 0, made.output
    script = (tmp_path / "out" / "setup-fabric.sh").read_text()
    facts = _facts("spark-m1-mesh", "spark-m2-mesh", "spark-m3-mesh")
    for choice, node_facts in zip(choices, facts, strict=True):
        have = {n.name: n.ipv4[0] for n in node_facts.netdevs}  # as the node has them now
        words = re.search(rf"^  \[{choice.name}\]='([^']*)'$", script, re.M)
        assert words, script
        pairs = words.group(1).split()
        assert dict(zip(pairs[::2], pairs[1::2], strict=True)) == have


def test_what_looks_wrong_is_said() -> None:
    choices = disc.choose(
        _facts("spark-a-both-ports", "spark-c-twin-down-mtu1500", "spark-d-twins-one-subnet-no-rocev2")
    )
    c, d = _warnings(choices, "spark-c"), _warnings(choices, "spark-d")
    assert "enp1s0f1np1 has MTU 1500; the fabric wants 9000" in c
    assert "down (not cabled?): enP2p1s0f0np0, enP2p1s0f1np1, enp1s0f0np0" in c
    assert "host name 'Spark-C.lab' is not a node name" in c and choices[1].name == "spark-c"
    assert choices[1].hcas == ["rocep1s0f1"]  # the twin is down: not an RDMA device NCCL can use
    assert "enP2p1s0f1np1 and enp1s0f1np1 are both on 192.168.100.0/24" in d
    assert "has no RoCE v2 IPv4 GID" in d
    assert choices[2].netdev and choices[2].netdev.name == "enp1s0f1np1"  # a tie: the first twin


def test_a_twin_without_an_address_is_left_out_of_hcas_with_the_fix() -> None:
    """Listed, preflight would refuse the twin for its missing RoCE v2 IPv4 GID (a spec discover wrote)."""
    [choice] = disc.choose(_facts("spark-g-twin-up-no-address"))
    assert choice.netdev and choice.netdev.name == "enp1s0f1np1" and choice.hcas == ["rocep1s0f1"]
    assert any(
        w.startswith("enP2p1s0f1np1, the twin of enp1s0f1np1 on the same port, is up without an IPv4 address")
        and "roceP2p1s0f1 is left out of hcas" in w
        for w in choice.warnings
    ), choice.warnings
    [both] = disc.choose(_facts("spark-a-both-ports"))
    assert len(both.hcas) == 2 and not any("twin of" in w for w in both.warnings)  # an addressed twin is listed


def test_gpu_counts_missing_pieces_and_other_rdma_names() -> None:
    choices = disc.choose(_facts("spark-a-both-ports", "spark-e-mlx5-ibdev2netdev-no-smi", "desktop-no-cx7"))
    assert choices[1].hcas == ["mlx5_1", "mlx5_3"] and choices[1].ip == "192.168.100.14"
    assert "no nvidia-smi on this node" in _warnings(choices, "spark-e")
    assert "nodes disagree on their GPU count (spark-a: 1, desktop: 2)" in _warnings(choices, "spark-a")
    assert "no netdev with an RDMA device behind it" in _warnings(choices, "desktop")
    assert choices[2].netdev is None and choices[2].ip == disc.PLACEHOLDER_IP
    truncated = _facts("spark-f-truncated")[0]
    assert "ended early" in truncated.warnings[0] and truncated.gpus == []


@pytest.mark.parametrize("junk", ["", "\x00\xff garbage\n", "netdev\ninet x y z\ngid a b\nrdma\nos\nend\n"])
def test_any_output_parses_without_a_traceback(junk: str) -> None:
    facts = parse("h", junk)
    choices = disc.choose([facts])
    assert disc.to_yaml(choices, disc.SshSettings(), {}).startswith("#")


FAKE_SSH = """#!/bin/sh
# Like ssh: the destination is the word after --; the remote command comes last; 255 when unreachable.
printf '%s\\n' "$*" >>"$FAKE_SSH_LOG"
while [ "$1" != -- ]; do shift; done
host=$2
cat >/dev/null
if [ -x "$FAKE_SSH_DIR/$host.run" ]; then exec "$FAKE_SSH_DIR/$host.run"; fi
if [ -f "$FAKE_SSH_DIR/$host.out" ]; then cat "$FAKE_SSH_DIR/$host.out"; exit 0; fi
echo "ssh: connect to host $host port 22: Connection refused" >&2
exit 255
"""


@pytest.fixture
def fake_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text(FAKE_SSH)
    (bin_dir / "ssh").chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_SSH_DIR", str(tmp_path))
    monkeypatch.setenv("FAKE_SSH_LOG", str(tmp_path / "ssh.log"))
    shutil.copy(DATA / "spark-a-both-ports.out", tmp_path / "spark-a.local.out")
    shutil.copy(DATA / "spark-b-crosscabled.out", tmp_path / "10.0.0.22.out")
    return tmp_path


def test_cli_probes_every_host_and_prints_the_section(fake_ssh: Path) -> None:
    args = [
        "discover",
        "--ssh-user",
        "aurora",
        "--identity-file",
        "/k/id",
        "--port",
        "2200",
        "spark-a.local",
        "10.0.0.22",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "ssh: spark-a.local" in result.stdout and "netdev: enp1s0f0np0" in result.stdout
    assert "warning: spark-b: down (not cabled?)" in result.stderr
    calls = sorted((fake_ssh / "ssh.log").read_text().splitlines())
    assert calls[0] == "-o BatchMode=yes -o ConnectTimeout=10 -p 2200 -l aurora -i /k/id -- 10.0.0.22 sh -s"


def test_cli_an_unreachable_host_exits_1_naming_it(fake_ssh: Path) -> None:
    result = CliRunner().invoke(cli, ["discover", "--format", "json", "spark-a.local", "10.0.0.99"])
    assert result.exit_code == 1
    assert "error: 10.0.0.99 unreachable: ssh: connect to host 10.0.0.99 port 22: Connection refused" in result.stderr
    assert [n["name"] for n in json.loads(result.stdout)["cluster"]["nodes"]] == ["spark-a"]


def test_cli_a_host_key_it_does_not_know_is_refused_with_the_fix(fake_ssh: Path) -> None:
    """BatchMode asks nothing: ssh refuses a key nobody recorded, and discover says how to record it checked."""
    refuse = "#!/bin/sh\necho 'No ED25519 host key is known for {} and you have requested strict checking.' >&2\n"
    (fake_ssh / "10.0.0.22.run").write_text(
        refuse.format("10.0.0.22") + "echo 'Host key verification failed.' >&2\nexit 255\n"
    )
    (fake_ssh / "10.0.0.22.run").chmod(stat.S_IRWXU)
    result = CliRunner().invoke(
        cli, ["discover", "--ssh-user", "aurora", "--port", "2200", "spark-a.local", "10.0.0.22"]
    )
    assert result.exit_code == 1
    said = " ".join(result.stderr.split())
    assert "error: 10.0.0.22 unreachable: Host key verification failed. (this machine does not know 10.0.0.22's" in said
    assert "connect once with `ssh -p 2200 aurora@10.0.0.22`, compare the fingerprint with `ssh-keygen -lf" in said


@pytest.mark.parametrize("bad", [["-oProxyCommand=x"], ["a;b"], ["--ssh-user", "Root;x", "h"], ["h", "h"]])
def test_cli_refuses_what_is_not_a_host_or_user(fake_ssh: Path, bad: list[str]) -> None:
    result = CliRunner().invoke(cli, ["discover", *bad])
    assert result.exit_code == 2 and not (fake_ssh / "ssh.log").exists()


@pytest.mark.parametrize("shell", ["dash", "busybox sh", "bash --posix"])
def test_the_probe_runs_under_posix_shells(shell: str) -> None:
    if shutil.which(shell.split()[0]) is None:
        pytest.skip(f"{shell} is not installed")
    done = subprocess.run([*shell.split(), "-s"], input=disc.probe_text(), capture_output=True, text=True, check=True)
    facts = parse("localhost", done.stdout)
    assert done.stderr == "" and facts.hostname and not any("ended early" in w for w in facts.warnings)
    assert "lo" in done.stdout and "inet lo 127.0.0.1/8" in done.stdout


def test_the_probe_is_shellcheck_clean_as_posix_sh() -> None:
    probe = data_dir("templates") / "discover" / "probe.sh"
    done = subprocess.run([shellcheck_binary(), "-s", "sh", str(probe)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_a_node_answer_that_is_not_utf8_is_read(fake_ssh: Path) -> None:
    """A login shell's motd in Latin-1 before the probe's lines: the lines are read, the bytes replaced."""
    answer = (fake_ssh / "spark-a.local.out").read_bytes()
    (fake_ssh / "spark-a.local.out").write_bytes(b"Willkommen auf \xfcberall \xe9t\xe9\n" + answer)
    result = CliRunner().invoke(cli, ["discover", "spark-a.local", "10.0.0.22"])
    assert result.exit_code == 0, result.output
    assert "netdev: enp1s0f0np0" in result.stdout


def test_control_characters_a_node_sends_reach_neither_the_terminal_nor_the_yaml(fake_ssh: Path) -> None:
    answer = (fake_ssh / "10.0.0.22.out").read_text()
    hostile = answer.replace("hostname spark-b", "hostname spark-b\x1b]0;owned\x07\x00\u2028x: 1")
    hostile = hostile.replace("rdma rocep1s0f1 enp1s0f1np1", "rdma rocep1s0f1 enp1s0f1\x1b[2Jnp1")
    (fake_ssh / "10.0.0.22.out").write_text(hostile + "gpu-error \x1b[31mfailed\rhidden\n")
    (fake_ssh / "10.0.0.9.run").write_text("#!/bin/sh\nprintf 'refused \\033[2J\\n' >&2\nexit 255\n")
    (fake_ssh / "10.0.0.9.run").chmod(stat.S_IRWXU)
    result = CliRunner().invoke(cli, ["discover", "spark-a.local", "10.0.0.22", "10.0.0.9"])
    assert result.exit_code == 1, result.output
    for text in (result.stdout, result.stderr):
        assert not any(c in text for c in "\x1b\x00\x07\r\u2028"), repr(text)
    assert "\\x1b[2J" in result.stdout and "error: 10.0.0.9 unreachable: refused \\x1b[2J" in result.stderr
    cluster = YAML(typ="safe").load(result.stdout)["cluster"]
    assert list(cluster) == ["nodes"] and len(cluster["nodes"]) == 2


def test_a_node_that_answers_without_end_is_cut_off(fake_ssh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read at most MAX_ANSWER_BYTES of what a node sends, then stop it, and say so."""
    monkeypatch.setattr(disc, "PROBE_TIMEOUT_S", 20)
    answer = (fake_ssh / "10.0.0.22.out").read_text()
    run = fake_ssh / "10.0.0.22.run"
    run.write_text(f"#!/bin/sh\nprintf '%s' {shlex.quote(answer)}\nexec yes motd\n")
    run.chmod(stat.S_IRWXU)
    result = CliRunner().invoke(cli, ["discover", "spark-a.local", "10.0.0.22"])
    assert result.exit_code == 0, result.output
    assert f"warning: spark-b: the node's answer was longer than {disc.MAX_ANSWER_BYTES} bytes" in result.stderr
    assert "netdev: enp1s0f0np0" in result.stdout
