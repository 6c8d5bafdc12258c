"""Every engine command line sparkc writes, fed to the engine's real argument parser: vLLM 0.32.0's
`vllm serve` (the CPU build simcluster/install_vllm.sh installs) and SGLang 0.5.23's server parser
(tools/make_sglang_venv.sh). The words are those of every example and of the specs the tests compile
(their variants below, and the imported test recipes), for every node's rank. Also: the checked-in flag
tables are what tools/engine_flag_table.py writes from those parsers today."""

from __future__ import annotations

import json
import os
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from compiler.pipeline import Beside, compile_text
from compiler.plan import flat
from compiler.resolve.context import derive
from compiler.resources import data_dir
from compiler.spec.build import build_spec
from compiler.spec.schema import load_schema, with_defaults
from compiler.spec.typed import EngineKind
from compiler.tools.importer import import_recipe
from simcluster.vllm_cpu import VLLM_VENV, vllm_available
from tests.product import needs
from tests.specs import EXAMPLES, ROOT, diagnostics_text, dump, example, with_changes

SGLANG_VENV = Path(os.environ.get("SPARKC_SGLANG_VENV", "/opt/sparkc-sim/sglang-venv"))
TOOL = ROOT / "tools" / "engine_flag_table.py"
RECIPES = ROOT / "tests" / "recipes"

# Specs the tests compile besides the examples: each a base example and the fields it changes.
VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("solo-qwen3-32b", {"engine.trust_remote_code": True, "engine.reasoning_parser": "qwen3"}),
    ("solo-qwen3-32b", {"engine.kv_cache_memory": "8g", "engine.args": ["--enforce-eager", "--max-num-seqs", "4"]}),
    (
        "solo-qwen3-32b",
        {"engine.args": ["--ignore-patterns", "*.pt", "*.bin", "--compilation-config.cudagraph_mode", "NONE"]},
    ),
    ("solo-qwen3-32b", {"model.name": "qwen3-32b", "engine.args": ["--max_num_seqs=4", "--no-enable-prefix-caching"]}),
    ("llama33-70b-2spark-native", {"engine.args": ["--tensor-parallel-size", "2", "-tp=2"]}),
    ("qwen3-32b-2spark-ray-crosscabled", {"engine.pipeline_parallel": 2, "engine.tensor_parallel": 1}),
    ("sglang-qwen3-30b-2spark", {"engine.pipeline_parallel": 2, "engine.tensor_parallel": 1}),
    ("sglang-qwen3-30b-2spark", {"engine.trust_remote_code": True, "engine.reasoning_parser": "qwen3"}),
    ("sglang-qwen3-30b-2spark", {"engine.args": ["--enable-metrics", "--mem-fraction-static=0.75"]}),
    (
        "sglang-qwen3-30b-2spark",
        {"model.draft": {"path": "/models/draft", "method": "eagle3", "num_speculative_tokens": 3}},
    ),
    ("solo-qwen3-32b", {"engine.kind": "sglang", "container.image": "lmsysorg/sglang:v0.5.23-cu130"}),
    (
        "sglang-qwen3-30b-2spark",
        {"engine.tensor_parallel": 1, "engine.data_parallel": 2, "engine.expert_parallel": True},
    ),
    ("solo-qwen3-32b", {"cluster.nodes.0.gpus": 2, "engine.data_parallel": 2}),
    ("solo-qwen3-32b", {"model.draft": {"path": "/models/medusa", "method": "medusa"}}),
    ("solo-qwen3-32b", {"model.draft": {"method": "suffix"}}),
    ("solo-qwen3-32b", {"model.draft": {"method": "ngram_gpu", "num_speculative_tokens": 3, "prompt_lookup_min": 2}}),
    ("sglang-qwen3-30b-2spark", {"model.draft": {"method": "mtp", "num_speculative_tokens": 2}}),
    ("sglang-qwen3-30b-2spark", {"model.draft": {"method": "ngram", "num_speculative_tokens": 7}}),
    ("sglang-qwen3-30b-2spark", {"model.draft": {"path": "/models/draft", "method": "draft_model"}}),
]


def _specs() -> list[tuple[str, dict[str, Any], bool]]:
    """(label, spec, whether it must compile)."""
    specs = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        specs.append((path.stem, example(path.stem), True))
    for i, (name, changes) in enumerate(VARIANTS):
        specs.append((f"{name}+{i}", with_changes(example(name), changes), True))
    for path in sorted(RECIPES.rglob("*.yaml")):  # the test recipes and the public ones
        text = import_recipe(path.read_text(encoding="utf-8"), path.name).spec_text
        specs.append((f"recipe {path.name}", YAML(typ="safe").load(text), False))
    return specs


@cache
def commands() -> dict[EngineKind, list[tuple[str, list[str]]]]:
    """Engine -> (which spec and rank, the words after the program) for every spec that compiles."""
    schema = load_schema()
    found: dict[EngineKind, list[tuple[str, list[str]]]] = {kind: [] for kind in EngineKind}
    for name, spec, must in _specs():
        result = compile_text(dump(spec), "spec.yaml", render_files=False, beside=Beside(spec_dir=EXAMPLES))
        if not result.ok:
            assert not must, f"{name}: {diagnostics_text(result)}"
            continue  # an imported recipe keeps PLACEHOLDERs for the nodes, say
        d = derive(build_spec(with_defaults(spec, schema), spec))
        for rank in range(len(d.nodes)):
            words = list(flat(d.engine.argv(d, rank).command))
            # `vllm serve MODEL ...`: the parser of the `vllm` command; `python3 -m sglang.launch_server ...`: SGLang's;
            # `trtllm-serve MODEL ...`: trtllm-serve's (test_trtllm.py feeds them to the stand-in's click).
            after = words[3:] if d.engine.kind is EngineKind.SGLANG else words[1:]
            found[d.engine.kind].append((f"{name} rank {rank}", after))
    return found


def test_every_example_and_variant_compiles_into_commands_for_both_engines() -> None:
    found = commands()
    examples = {p.stem for p in EXAMPLES.glob("*.yaml")}
    covered = {label.split(" rank")[0] for cmds in found.values() for label, _ in cmds}
    assert examples <= covered
    assert len(found[EngineKind.VLLM]) > 10 and len(found[EngineKind.SGLANG]) > 5


# Words the flag table calls wrong (tests/unit/test_engine_flags.py): wrong to the engine too.
WRONG = {
    EngineKind.VLLM: [
        ["--enforce-eagre"],
        ["--max-num-seqs"],
        ["--trust-remote-code", "true"],
        ["--kv-cache-dtype", "fp9"],
    ],
    EngineKind.SGLANG: [["--mem_fraction_static", "0.5"], ["--dist-timeout"], ["--enable-metrics", "yes"], ["--tp"]],
}
HEAD = {EngineKind.VLLM: ["serve", "/m"], EngineKind.SGLANG: ["--model-path", "/m"]}


@cache
def engine_run(engine: EngineKind, out: Path) -> tuple[list[str], list[str]]:
    """One start of the engine's parser (vLLM's import takes seconds): its verdicts on every command sparkc
    writes and on the wrong ones, and the flag table it writes into `out`."""
    python, env = _engine_python(engine)
    accepted = [words for _, words in commands()[engine]]
    wrong = [HEAD[engine] + w for w in WRONG[engine]]
    done = subprocess.run(
        [str(python), str(TOOL), engine.value, "--parse", "--out", str(out)],
        input=json.dumps(accepted + wrong),
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    verdicts = json.loads(done.stdout.strip().splitlines()[-1])
    return verdicts[: len(accepted)], verdicts[len(accepted) :]


@pytest.fixture(scope="module")
def tables_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("flag-tables")


@pytest.mark.parametrize("engine", [EngineKind.VLLM, EngineKind.SGLANG], ids=str)
def test_the_real_parser_accepts_every_command_sparkc_writes(engine: EngineKind, tables_dir: Path) -> None:
    cmds = commands()[engine]
    verdicts, _ = engine_run(engine, tables_dir / engine.value)
    refused = [f"{label}: {v}\n  {' '.join(words)}" for (label, words), v in zip(cmds, verdicts, strict=True) if v]
    assert refused == []


@pytest.mark.parametrize("engine", [EngineKind.VLLM, EngineKind.SGLANG], ids=str)
def test_the_real_parser_refuses_what_the_compile_check_refuses(engine: EngineKind, tables_dir: Path) -> None:
    _, verdicts = engine_run(engine, tables_dir / engine.value)
    assert all(verdicts), list(zip(WRONG[engine], verdicts, strict=True))


@pytest.mark.parametrize("engine", [EngineKind.VLLM, EngineKind.SGLANG], ids=str)
def test_the_checked_in_table_is_what_the_engine_parser_gives(engine: EngineKind, tables_dir: Path) -> None:
    engine_run(engine, tables_dir / engine.value)
    (written,) = (tables_dir / engine.value).glob("*.json")
    shipped = data_dir("flag_tables") / written.name
    assert shipped.is_file(), f"{written.name}: the engine here is a release sparkc has no table for"
    assert written.read_text(encoding="utf-8") == shipped.read_text(encoding="utf-8")


def _engine_python(engine: EngineKind) -> tuple[Path, dict[str, str]]:
    if engine is EngineKind.VLLM:
        needs(not vllm_available(), f"vLLM's CPU build in {VLLM_VENV} (bash simcluster/install_vllm.sh)")
        return VLLM_VENV / "bin" / "python3", {"VLLM_TARGET_DEVICE": "cpu"}
    python = SGLANG_VENV / "bin" / "python3"
    needs(not python.is_file(), f"SGLang's parser in {SGLANG_VENV} (bash tools/make_sglang_venv.sh {SGLANG_VENV})")
    return python, {}
