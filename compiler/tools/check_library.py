"""`python -m compiler.tools.check_library`: shellcheck what sparkc ships the same to every deployment.

A compile checks only a deployment's own scripts (compiler/output/lint.py); this checks, when sparkc is built (a
test runs it, so CI does), what no compile checks:

- the library (compiler/output/library.py), with `--shell=bash`;
- the node-side snippets it hands to the nodes' `sh` (runtime/node/, and the node scripts of
  `sparkc discover` and `sparkc setup-fabric`), with `--shell=sh`: the login shell may be dash or busybox;
- the library as the scripts of a feature matrix source it (vLLM with Ray and native, SGLang, split planes,
  hooks, a draft model, an API key, 1 to 8 nodes), with `--external-sources`: each script and the library
  read together, so a constant that no code reads any more is reported where the script assigns it.

Each part is one shellcheck run over many files, the two running at once. Exit 0 clean, 1 findings.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from compiler import __version__
from compiler.output.deployment import DEPLOYMENT
from compiler.output.library import library_text
from compiler.output.lint import shellcheck_binary
from compiler.pipeline import Beside, compile_text
from compiler.resources import data_dir

FLAGS = ("--format=gcc", "--norc", "--external-sources", "--source-path=SCRIPTDIR")
# A source checkout's examples (the wheel ships none): the folder beside compiler/, or one given.
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SEED = "seed-qwen35-122b-2spark-ray.yaml"
NODE_COUNTS = (8,)  # besides the examples' 1 and 2
# Where a script stops being its own: from here on it checks, reads and runs the library.
LIBRARY_PART = "\n# The code every script of this deployment shares"


def node_files() -> list[Path]:
    templates = data_dir("templates")
    others = [*(templates / "setup").glob("*.sh"), templates / "discover" / "probe.sh"]
    return sorted([*(data_dir("runtime") / "node").glob("*.sh"), *others])


def spec_with_nodes(seed_text: str, count: int) -> str:
    """The seed example with `count` nodes (tensor_parallel = count, one GPU each)."""
    head, rest = seed_text.split("  nodes:\n", 1)
    tail = rest[rest.index("container:") :]
    nodes = "".join(
        f"    - name: spark-{i:02d}\n"
        f"      ssh: spark-{i:02d}.local\n"
        f"      fabric: {{ip: 192.168.100.{10 + i}, netdev: enp1s0f1np1, hcas: [rocep1s0f1, roceP2p1s0f1]}}\n"
        for i in range(count)
    )
    return (head + "  nodes:\n" + nodes + tail).replace("tensor_parallel: 2", f"tensor_parallel: {count}")


def matrix(examples: Path) -> Iterator[tuple[str, str, Path]]:
    """(name, spec text, the folder it sits in) of every deployment the library is checked with."""
    for spec in sorted(examples.glob("*.yaml")):
        yield spec.stem, spec.read_text(encoding="utf-8"), spec.parent
    seed = (examples / SEED).read_text(encoding="utf-8")
    for count in NODE_COUNTS:
        yield f"seed-{count}-nodes", spec_with_nodes(seed, count), examples


def write_deployments(folder: Path, examples: Path) -> list[str]:
    """Each matrix deployment's scripts under `folder`, each beside its lib/; the scripts to check."""
    roots = []
    for name, text, spec_dir in matrix(examples):
        result = compile_text(text, f"{name}.yaml", lint=False, beside=Beside(spec_dir=spec_dir))
        if not result.ok:
            raise SystemExit(f"{name}: the matrix spec does not compile: {[d.message for d in result.diagnostics]}")
        for path, content in result.files.items():
            target = folder / name / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        # Each file read with the library costs as much as the library: each deployment's deployment.sh (its
        # constants), and the seed's entry scripts, are enough to see each constant read.
        scripts = sorted(p for p in result.files if p.endswith(".sh") and "/" not in p)
        roots += [f"{name}/{s}" for s in scripts if s == DEPLOYMENT or name == SEED.removesuffix(".yaml")]
    return roots


def library_in_context(folder: Path, script: str) -> str:
    """The library's findings are reported only where it is checked itself, and alone it lacks the constants
    it reads: it is checked once inside `script` (a deployment.sh), in place of the lines that load it."""
    text = (folder / script).read_text(encoding="utf-8")
    whole = text[: text.index(LIBRARY_PART)] + "\n" + library_text(__version__) + '\nlaunch_main "$@"\n'
    path = folder / script.replace(".sh", ".with-library.sh")
    path.write_text(whole, encoding="utf-8")
    return str(path.relative_to(folder))


def check(examples: Path = EXAMPLES) -> list[str]:
    shellcheck = shellcheck_binary()
    with tempfile.TemporaryDirectory(prefix="sparkc-check-library-") as tmp:
        folder = Path(tmp)
        roots = write_deployments(folder, examples)
        seed = f"{SEED.removesuffix('.yaml')}/{DEPLOYMENT}"
        roots = [library_in_context(folder, seed) if root == seed else root for root in roots]
        half = len(roots) // 2
        runs = [
            [shellcheck, *FLAGS, "--shell=sh", *map(str, node_files())],
            [shellcheck, *FLAGS, "--shell=bash", *roots[:half]],
            [shellcheck, *FLAGS, "--shell=bash", *roots[half:]],
        ]
        pipe = subprocess.PIPE
        started = [subprocess.Popen(argv, cwd=folder, stdout=pipe, stderr=subprocess.STDOUT) for argv in runs]
        findings = []
        for process in started:
            out, _ = process.communicate()
            findings += [line for line in out.decode("utf-8", "replace").splitlines() if line.strip()]
    return findings


def main(argv: list[str] | None = None) -> int:
    """`python -m compiler.tools.check_library [EXAMPLES_FOLDER]` (default: the checkout's examples/)."""
    args = sys.argv[1:] if argv is None else argv
    findings = check(Path(args[0]) if args else EXAMPLES)
    for line in findings:
        print(line)
    print(f"check_library: {len(findings)} finding(s)" if findings else "check_library: clean", file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
