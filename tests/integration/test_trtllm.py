"""TensorRT-LLM: the spec's fields as trtllm-serve's flags and its --extra_llm_api_options file, the hostfile
and mpirun on the head, engine.args against trtllm-serve's click options, and what is refused at compile."""

from __future__ import annotations

from typing import Any

import pytest
from ruamel.yaml import YAML

from compiler.diagnostics import Severity
from compiler.plan import flat
from tests.specs import (
    DELETE,
    compile_spec,
    container_command,
    diagnostics_text,
    example,
    flag_value,
    node_env,
    with_changes,
)

EXAMPLE = "trtllm-qwen3-235b-2spark-mpi"


def compiled(changes: dict[str, Any] | None = None) -> Any:
    result = compile_spec(with_changes(example(EXAMPLE), changes or {}))
    assert result.ok, diagnostics_text(result)
    return result


def errors(changes: dict[str, Any]) -> list[str]:
    result = compile_spec(with_changes(example(EXAMPLE), changes))
    assert not result.ok
    return [f"{'.'.join(map(str, d.path))}: {d.message}" for d in result.diagnostics if d.severity is Severity.ERROR]


def test_spec_fields_become_trtllm_serve_flags_under_mpirun() -> None:
    plan = compiled().plan
    words = flat(plan.ray_engine)
    assert words[:8] == ("mpirun", "--hostfile", "/sparkc/trtllm/hostfile", "-np", "2", "--bind-to", "none", "-x")
    serve = words[words.index("trtllm-llmapi-launch") + 1 :]
    assert serve[:2] == ("trtllm-serve", "/home/aurora/models/Qwen3-235B-A22B-FP4")
    assert flag_value(serve, "--tp_size") == "2"
    assert flag_value(serve, "--pp_size") == "1"
    assert flag_value(serve, "--port") == "8355"
    assert flag_value(serve, "--host") == "0.0.0.0"
    assert flag_value(serve, "--max_seq_len") == "32768"
    assert flag_value(serve, "--backend") == "pytorch"
    assert flag_value(serve, "--extra_llm_api_options") == "/sparkc/trtllm/extra-llm-api-options.yaml"
    assert serve[-4:] == ("--max_batch_size", "4", "--max_num_tokens", "32768")  # engine.args, last
    assert flag_value(words, "-x") == "HF_TOKEN"  # a secret reaches the ranks through mpirun, by name
    assert plan.backend == "mpi" and plan.start_waves == (("spark-a", "spark-b"),)
    assert plan.served_model_name == "Qwen3-235B-A22B-FP4"  # trtllm-serve names a folder after itself


def test_every_container_runs_sshd_on_its_address_and_the_head_mounts_the_files() -> None:
    plan = compiled().plan
    assert container_command(plan, "spark-a") == (
        "-c",
        "@sparkc-mpi-sshd@",
        "sparkc-mpi-sshd",
        "2233",
        "192.168.100.10",
        "HF_TOKEN",
    )
    assert container_command(plan, "spark-b")[3:5] == ("2233", "192.168.100.11")
    head, worker = (flat(n.docker_run) for n in plan.nodes)
    assert "@build@/trtllm:/sparkc/trtllm:ro" in head and "@build@/trtllm:/sparkc/trtllm:ro" not in worker
    for name, netdev in (("spark-a", "enp1s0f1np1"), ("spark-b", "enp1s0f1np1")):
        env = node_env(plan, name)
        assert (
            env["OMPI_MCA_btl_tcp_if_include"] == env["UCX_NET_DEVICES"] == env["OMPI_MCA_oob_tcp_if_include"] == netdev
        )
        assert env["OMPI_ALLOW_RUN_AS_ROOT"] == env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"


def test_the_options_file_and_hostfile_are_written_and_deterministic() -> None:
    result = compiled({"engine.kv_cache_memory": "40g", "cluster.nodes.1.fabric.ip": "192.168.100.21"})
    options = YAML(typ="safe").load(result.files["trtllm/extra-llm-api-options.yaml"])
    assert options == {
        "cuda_graph_config": {"enable_padding": True},
        "kv_cache_config": {"dtype": "auto", "free_gpu_memory_fraction": 0.9, "max_gpu_total_bytes": 40 * 1024**3},
        "print_iter_log": False,
    }
    hosts = [line for line in result.files["trtllm/hostfile"].splitlines() if not line.startswith("#")]
    assert hosts == ["192.168.100.10 slots=1", "192.168.100.21 slots=1"]
    again = compiled({"engine.kv_cache_memory": "40g", "cluster.nodes.1.fabric.ip": "192.168.100.21"})
    assert again.files == result.files
    assert '"trtllm/hostfile"' in result.files["manifest.json"]


def test_one_node_runs_trtllm_serve_itself_with_its_options_file() -> None:
    plan = compiled({"cluster.nodes.1": DELETE, "engine.tensor_parallel": 1, "container.secrets": DELETE}).plan
    assert plan.backend == "native" and plan.ray_engine == () and plan.mpi_ssh_port == 0
    command = container_command(plan, "spark-a")
    assert command[:2] == ("trtllm-serve", "/home/aurora/models/Qwen3-235B-A22B-FP4")
    assert flag_value(command, "--extra_llm_api_options") == "/sparkc/trtllm/extra-llm-api-options.yaml"


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        (["--tp-size", "2"], "--tp-size is not a flag of TensorRT-LLM 1.3.0rc5; did you mean --tp_size?"),
        (["--max_batch"], "--max_batch is not a flag of TensorRT-LLM"),  # click takes no abbreviation
        (["--backend", "onnx"], "--backend 'onnx' is not one of its choices"),
        (["--tp_size", "1"], "--tp_size is set by sparkc; the plan gives it 2; use engine.tensor_parallel instead"),
        (
            ["--tensor_parallel_size", "1"],
            "--tensor_parallel_size (as --tp_size) is set by sparkc; the plan gives it 2; use engine.tensor_parallel",
        ),
        (["--config", "x.yaml"], "use engine.llm_api_options instead"),
        (["--trust_remote_code", "yes"], "'yes' would be left over (--trust_remote_code takes no value)"),
    ],
)
def test_engine_args_are_read_as_trtllm_serve_reads_them(args: list[str], wanted: str) -> None:
    found = errors({"engine.args": args})
    assert any(wanted in e for e in found), found


@pytest.mark.parametrize(
    ("changes", "wanted"),
    [
        ({"engine.backend": "ray"}, "engine.backend: TensorRT-LLM forms its own multi-node group; use backend: mpi"),
        ({"engine.backend": "native"}, "engine.backend: TensorRT-LLM forms a multi-node group only under MPI"),
        (
            {"engine.kind": "vllm", "engine.backend": "mpi", "engine.args": [], "engine.llm_api_options": DELETE},
            "engine.backend: only TensorRT-LLM runs under mpirun; vLLM forms its group with backend: ray",
        ),
        ({"model.name": "qwen3"}, "model.name: trtllm-serve serves a local folder under the folder's name"),
        (
            {"model.draft": {"path": "/models/draft", "method": "eagle3", "num_speculative_tokens": 3}},
            "model.draft: sparkc writes no TensorRT-LLM speculative_config from model.draft",
        ),
        (
            {"engine.llm_api_options.tensor_parallel_size": 1},
            "engine.llm_api_options.tensor_parallel_size: tensor_parallel_size is set from engine.tensor_parallel",
        ),
        (
            {"engine.llm_api_options.kv_cache_config.free_gpu_memory_fraction": 0.5},
            "kv_cache_config.free_gpu_memory_fraction is written from engine.gpu_memory_utilization",
        ),
        (
            {"engine.kind": "sglang", "engine.backend": DELETE, "engine.args": []},
            "engine.llm_api_options: llm_api_options are TensorRT-LLM's",
        ),
        ({"launch.mpi_ssh_port": 8355}, "the MPI ssh port 8355 is also the API port"),
        ({"engine.tensor_parallel": 4}, "engine.tensor_parallel"),
    ],
)
def test_what_trtllm_or_mpirun_would_refuse_is_refused_at_compile(changes: dict[str, Any], wanted: str) -> None:
    found = errors(changes)
    assert any(wanted in e for e in found), found


def test_refusals_point_at_the_line_with_the_fix() -> None:
    result = compile_spec(with_changes(example(EXAMPLE), {"engine.backend": "ray"}), "t.yaml")
    text = diagnostics_text(result, "t.yaml")
    assert (
        "t.yaml:" in text and ": engine.backend: TensorRT-LLM forms its own multi-node group; use backend: mpi" in text
    )


def test_every_trtllm_command_parses_with_trtllm_serves_click_options() -> None:
    """The stand-in's click command carries serve.py's options as the flag table does: both read from the
    same source, so every command sparkc writes parses there, and what the table refuses click refuses."""
    import click

    from compiler.engines.flag_table import newest
    from compiler.spec.typed import EngineKind
    from simcluster.standin.trtllm_cli import serve
    from tests.integration.test_engine_parsers import commands

    table = newest(EngineKind.TRTLLM)
    click_names = {name for p in serve.params if isinstance(p, click.Option) for name in p.opts}
    assert click_names == set(table.options)
    written = commands()[EngineKind.TRTLLM]
    assert written, "no TensorRT-LLM command among the examples"
    for _, words in written:
        serve.make_context("trtllm-serve", list(words))  # raises click's UsageError on what it refuses
    for wrong in (["--tp-size", "2"], ["--max_batch", "4"], ["--trust_remote_code", "yes"], ["--backend", "onnx"]):
        with pytest.raises(click.UsageError):
            serve.make_context("trtllm-serve", ["/m", *wrong])


def test_any_options_read_back_from_the_file_as_written() -> None:
    odd = {"on": 1, "2": [1, "a: b"], "key with: colon": {"nested": None, "v": "two words"}, "ünï": "'\"$`", "x_y": {}}
    result = compiled({"engine.llm_api_options": odd, "engine.gpu_memory_utilization": DELETE})
    assert YAML(typ="safe").load(result.files["trtllm/extra-llm-api-options.yaml"]) == odd


@pytest.mark.parametrize("nodes", [1, 2])
def test_cuda_tools_are_set_as_nvidias_playbook_sets_them(nodes: int) -> None:
    changes = (
        {} if nodes == 2 else {"cluster.nodes": example(EXAMPLE)["cluster"]["nodes"][:1], "engine.tensor_parallel": 1}
    )
    plan = compiled(changes).plan
    for node in plan.nodes:
        env = node_env(plan, node.name)
        assert env["TRITON_PTXAS_PATH"] == "/usr/local/cuda/bin/ptxas"
        assert env["CPATH"] == "/usr/local/cuda/include"


def test_open_mpi_5_gets_its_daemons_interface_beside_open_mpi_4s() -> None:
    plan = compiled().plan
    for node in plan.nodes:
        env = node_env(plan, node.name)
        assert env["PRTE_MCA_oob_tcp_if_include"] == env["OMPI_MCA_oob_tcp_if_include"] == "enp1s0f1np1"


def test_only_the_heads_log_is_read_for_nccl_lines_under_mpirun() -> None:
    """mpirun writes every rank's output to its own, in the head's container; the others log sshd only."""
    plan = compiled().plan
    assert [str(n.nccl_transport) for n in plan.nodes] == ["IB", ""]


@pytest.mark.parametrize(
    ("hook", "installs"),
    [
        ("apt-get update && apt-get install -y --no-install-recommends openssh-server", True),
        ("apk add openssh", True),
        ("apt-get install -y openssh-client", False),  # the client only: no sshd
        ("echo openssh-server", False),
    ],
)
def test_a_hook_that_installs_sshd_is_noted_for_the_launchers_image_check(hook: str, installs: bool) -> None:
    result = compiled({"container.hooks": {"pre_engine": [hook]}})
    assert result.plan.mpi_sshd_from_hooks is installs
    assert f"readonly SPARKC_MPI_SSHD_FROM_HOOKS={int(installs)}" in result.files["deployment.sh"]
