"""How a case runs: the spec written as text, compiled, and its `docker run` commands started on the fakes
by the generated launcher's own functions, the worker's login shell bash once and dash once.

The whole launcher is not run per case (it waits on probes and timeouts): the driver below sources it
without its final `launch_main "$@"` (lib/ beside it) and calls what start_wave calls, so the real
quoting path runs (sh_quote, ssh, the node's login shell, dd for secrets) and nothing else.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compiler import __version__
from compiler.diagnostics import Diagnostic, Severity
from compiler.output.library import library_path, library_text
from compiler.plan import NodePlan, Plan
from tests.fakes.cluster import FakeCluster, image_entrypoint
from tests.security.corpus import Arrival, Field
from tests.specs import DELETE, example, launched_words, ray_engine_words, with_changes

DRIVER = r"""
launcher=$1 sparkc_test_mode=$2
shift 2
# shellcheck source=/dev/null
source "$launcher"
# what launch_main does before its options: the secrets from the environment, the compiled timeout
read_secrets
SPARKC_TIMEOUT=$SPARKC_DEFAULT_TIMEOUT
for sparkc_test_node; do
  for sparkc_test_hook in "${!SPARKC_HOST_HOOKS[@]}"; do
    host_hook "$sparkc_test_node" "$sparkc_test_hook"
  done
  if [[ $sparkc_test_mode == secrets ]]; then
    start_one "$sparkc_test_node"
  else
    docker_run_argv "$sparkc_test_node"
    on_node "$sparkc_test_node" "${SPARKC_ARGV[@]}"
  fi
done
if ((${#SPARKC_ENGINE_COMMAND[@]})) && [[ $1 == "$SPARKC_HEAD" ]]; then
  engine_argv "$SPARKC_ENGINE_WRAPPER"
  on_node "$SPARKC_HEAD" "${SPARKC_ARGV[@]}"
fi
"""

# Each case runs twice: the worker's login shell bash, then dash, the launcher's locale UTF-8, then C
# (bash's printf %q writes $'...' for non-ASCII bytes only in C, which dash reads as text; a length in
# characters differs from one in bytes only in UTF-8). The head (local) is started in the first run.
SHELLS = (("bash", "C.UTF-8"), ("dash", "C"))
# The other two login shells a node may have (Debian's zsh and busybox), run on a sample of the corpus.
OTHER_SHELLS = (("zsh", "C.UTF-8"), ("busybox sh", "C"))

# Words a clear refusal uses: it says what the value must be, or what is wrong with it.
CLEAR = re.compile(
    r"must be|must not|is not|are not allowed|bytes long|should be|neither|not a value|upper-case|reserved|"
    r"does not match|is too long|run a program|not one sparkc passes"
)


def spec_text(spec: Mapping[str, Any]) -> str:
    """The spec as YAML text that holds every value exactly: JSON (a subset of YAML) with each string
    double-quoted, and the characters YAML reads as line breaks or refuses raw (DEL, C1, U+2028/9)
    written as escapes, so the value that reaches sparkc is the one the case wrote."""
    text = json.dumps(spec, indent=2, ensure_ascii=False)
    text = re.sub("[\x7f-\x9f\u2028\u2029\ufeff]", lambda m: f"\\u{ord(m.group()):04x}", text)
    # YAML allows an implicit key of at most 1024 characters; a longer one is written as an explicit key.
    return re.sub(r'^( *)("(?:[^"\\]|\\.){1025,}"): ', r"\1? \2\n\1: ", text, flags=re.MULTILINE)


def base_spec(field: Field) -> dict[str, Any]:
    spec = example(field.base)
    return spec if field.keep_secrets else with_changes(spec, {"container.secrets": DELETE})


def refusal_problems(diagnostics: Sequence[Diagnostic], field: Field) -> list[str]:
    """What is unclear about a refusal (empty: it is clear): every error has a line, one points into the
    field, and it names the problem."""
    errors = [d for d in diagnostics if d.severity is Severity.ERROR]
    problems = [f"error without a line: {d}" for d in errors if d.line <= 0]
    at_field = [d for d in errors if d.path[: len(field.path)] == field.path]
    if not at_field:
        problems.append(f"no error points into {field.path}: {errors}")
    elif not any(CLEAR.search(d.message) for d in at_field):
        problems.append(f"the error does not say what is wrong: {[d.message for d in at_field]}")
    return problems


def launcher_functions(script: str) -> str:
    """A generated script without its last line, `NAME_main "$@"`: sourcing it (with lib/ beside it)
    defines everything, runs nothing."""
    body = script.rstrip("\n")
    last = body.rsplit("\n", 1)[-1]
    assert re.fullmatch(r'[a-z]+_main "\$@"', last), "the script no longer ends with its main"
    return body[: -len(last)]


def write_functions(script: str, path: Path, deployment: str | None = None) -> None:
    """launcher_functions(script) as `path`, with the library beside it as in a build folder, and `deployment`
    (the text of deployment.sh, which the script sources) where the folder lacks one."""
    path.write_text(launcher_functions(script), encoding="utf-8")
    if deployment is not None:
        path.with_name("deployment.sh").write_text(deployment, encoding="utf-8")
    library = path.parent / library_path(__version__)
    library.parent.mkdir(parents=True, exist_ok=True)
    library.write_text(library_text(__version__), encoding="utf-8")


@dataclass
class Run:
    shell: str  # the worker's login shell
    fake: FakeCluster
    nodes: list[NodePlan]  # the nodes started in this run
    output: str


def workers(plan: Plan) -> list[NodePlan]:
    return [n for n in plan.nodes if n.ssh_target]


def deliver(
    plan: Plan,
    files: Mapping[str, str],
    root: Path,
    path: str,
    env: Mapping[str, str],
    shells: Sequence[tuple[str, str]] = SHELLS,
) -> list[Run]:
    """Start every node's container on fresh fakes, once per entry of `shells` (the head in the first);
    all runs at once (one bash process each). `files`: the compile's."""
    functions = root / "launch-functions.sh"
    write_functions(files["launch-cluster.sh"], functions, files["deployment.sh"])
    mode = "secrets" if plan.secrets else "plain"
    started = []
    for shell, locale in shells:
        fake = FakeCluster(root / shell.replace(" ", "-"))
        for node in plan.nodes:
            fake.add_node(node.name, node.ssh_target, head=node.name == plan.head)
            fake.add_image(node.name, plan.image, entrypoint=image_entrypoint(plan.image))
        for node in workers(plan):
            fake.login_shell(node.name, *shell.split())
        fake.set("record-only")
        nodes = plan.nodes if shell == shells[0][0] else workers(plan)
        full_env = {k: v for k, v in os.environ.items() if k != "FAKE_NODE"}
        full_env.update(env, PATH=path, FAKE_STATE=str(fake.state), LC_ALL=locale)
        proc = subprocess.Popen(
            ["bash", "-c", DRIVER, "driver", str(functions), mode, *(n.name for n in nodes)],
            env=full_env,
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        started.append((shell, fake, list(nodes), proc))
    runs = []
    for shell, fake, nodes, proc in started:
        out, _ = proc.communicate(timeout=60)
        output = out.decode("utf-8", "replace")
        assert proc.returncode == 0, f"login shell {shell}: exit {proc.returncode}\n{output}"
        runs.append(Run(shell, fake, nodes, output))
    return runs


def docker_runs(run: Run, node: str) -> list[list[str]]:
    return [argv for _, argv in run.fake.docker_calls(node) if argv[:2] == ["run", "-d"]]


def arrival_problems(plan: Plan, runs: Sequence[Run], arrivals: Sequence[Arrival]) -> list[str]:
    """Where a node did not get exactly the planned words, or a value not as written (empty: all did)."""
    problems = []
    for run in runs:
        for node in run.nodes:
            where = f"{node.name} (worker's login shell {run.shell})"
            recorded = docker_runs(run, node.name)
            planned = list(launched_words(plan, node)[1:])
            if recorded != [planned]:
                problems.append(f"{where}: docker ran {recorded}, planned {planned}")
                continue
            container = run.fake.container(node.name, node.container_name) or {}
            for a in arrivals:
                if a.workers_only and not node.ssh_target:
                    continue
                if a.kind == "word" and a.text not in recorded[0]:
                    problems.append(f"{where}: {a.text!r} is not one word of docker's argv {recorded[0]}")
                if a.kind == "env" and container.get("env", {}).get(a.key) != a.text:
                    problems.append(f"{where}: env {a.key}={container.get('env', {}).get(a.key)!r}, not {a.text!r}")
        problems += _ssh_problems(run, arrivals) + _engine_problems(plan, run, arrivals)
    return problems + _host_problems(runs, arrivals)


def _host_problems(runs: Sequence[Run], arrivals: Sequence[Arrival]) -> list[str]:
    """A host hook ran once on every node of every run and wrote exactly its payload (the runs share the
    file: one line each)."""
    problems = []
    for a in (a for a in arrivals if a.kind == "host"):
        path = Path(a.key)
        written = path.read_text(encoding="utf-8", errors="surrogateescape") if path.exists() else ""
        expected = "".join(a.text + "\n" for run in runs for _ in run.nodes)
        if written != expected:
            problems.append(f"the host hook wrote {written!r}, expected {expected!r}")
    return problems


def _ssh_problems(run: Run, arrivals: Sequence[Arrival]) -> list[str]:
    calls = run.fake.ssh_calls()
    wanted = [a.text for a in arrivals if a.kind == "ssh"]
    if wanted and not calls:
        return ["ssh was never called"]
    return [f"{w!r} is not one word of ssh's argv {argv}" for argv in calls for w in wanted if w not in argv]


def _engine_problems(plan: Plan, run: Run, arrivals: Sequence[Arrival]) -> list[str]:
    if not plan.ray_engine or plan.head not in (n.name for n in run.nodes):
        return []
    planned = list(ray_engine_words(plan))
    execs = [argv for _, argv in run.fake.docker_calls(plan.head) if argv[:2] == ["exec", "-d"]]
    if len(execs) != 1 or execs[0][-len(planned) :] != planned:
        return [f"the head ran {execs}, planned an exec ending in {planned}"]
    return [f"{a.text!r} is not one word of the engine's command {planned}" for a in arrivals
            if a.kind == "engine" and a.text not in planned]  # fmt: skip


def everything_recorded(runs: Sequence[Run], files: Mapping[str, str]) -> str:
    """Every command line the fakes saw, every generated file and the driver's output, as text."""
    parts = list(files.values())
    for run in runs:
        parts.append(run.output)
        parts += ["\n".join(argv) for argv in run.fake.ssh_calls()]
        parts += ["\n".join(argv) for _, argv in run.fake.docker_calls()]
    return "\n".join(parts)
