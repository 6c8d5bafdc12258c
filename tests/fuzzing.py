"""What the fuzz tests (tests/fuzz/test_fuzz.py) generate, and how they run sparkc on it.

Inputs come in three kinds: YAML text put together from YAML's own tokens and random text (control
characters, tabs, anchors, aliases, tags, directives, deep nesting); random trees of mappings, lists
and scalars dumped as YAML; and the examples with random edits, some of them keeping the spec valid.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import re
import resource
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from compiler.cli.main import main
from compiler.resolve.rules.ssh import ALLOWED
from tests.specs import EXAMPLES, example, with_changes

# Fixed and derandomized, no example database: CI runs the same inputs every time. For a longer hunt
# on a workstation: SPARKC_FUZZ_SCALE=20 (20 times the examples) and SPARKC_FUZZ_RANDOM=1 (new ones).
SCALE: Final = max(1, int(os.environ.get("SPARKC_FUZZ_SCALE", "1")))
settings.register_profile(
    "sparkc-fuzz",
    derandomize=not os.environ.get("SPARKC_FUZZ_RANDOM"),
    deadline=None,
    database=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FUZZ: Final = settings.get_profile("sparkc-fuzz")


def examples(count: int) -> settings:
    return settings(FUZZ, max_examples=count * SCALE)


# Bugs found by fuzzing and not fixed yet, each with a strict xfail in tests/fuzz/test_fuzz_regressions.py
# that turns red once it is fixed: then delete its line here too. A crash is one of these when the
# innermost sparkc frame of its traceback is (module, function), e.g. ("spec/load.py", "load_text").
# The loader's crashes found first were fixed by its input hardening; none is open now.
KNOWN_BUGS: Final[tuple[tuple[str, str], ...]] = ()
_FRAME: Final = re.compile(r'File ".*[/\\]compiler[/\\]((?:\w+[/\\])*\w+\.py)", line \d+, in (\w+)')


def known_bug(traceback_text: str) -> str | None:
    """The KNOWN_BUGS entry a crash is, from its traceback (printed with SPARKC_DEBUG=1), if any."""
    frames = list(_FRAME.finditer(traceback_text))
    if not frames or frames[-1].groups() not in KNOWN_BUGS:
        return None
    after = traceback_text[frames[-1].end() :].splitlines()
    kind = next((line.split(":")[0].split(".")[-1] for line in after if line[:1].strip()), "?")
    return f"{kind} in {' '.join(frames[-1].groups())}"


# -- running sparkc ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


def run_cli(argv: list[str]) -> Run:
    """compiler.cli.main.main in this process, its output captured; a crash's traceback is printed."""
    out, err = io.StringIO(), io.StringIO()
    debug = os.environ.get("SPARKC_DEBUG")
    os.environ["SPARKC_DEBUG"] = "1"  # a crash prints its traceback: known_bug reads it
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        if debug is None:
            del os.environ["SPARKC_DEBUG"]
        else:
            os.environ["SPARKC_DEBUG"] = debug
    return Run(code, out.getvalue(), err.getvalue())


class CpuBudgetExceeded(Exception):
    pass


@contextlib.contextmanager
def cpu_budget(seconds: int) -> Iterator[None]:
    """Stop a case that loops: CPU time (not wall time, so a busy machine does not matter) past
    `seconds` raises CpuBudgetExceeded. Children such as shellcheck are not counted."""

    def stop(signum: int, frame: object) -> None:
        raise CpuBudgetExceeded(f"still running after {seconds} s of CPU time: a loop that does not end")

    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    used = resource.getrusage(resource.RUSAGE_SELF)
    limit = int(used.ru_utime + used.ru_stime) + seconds
    previous = signal.signal(signal.SIGXCPU, stop)
    resource.setrlimit(resource.RLIMIT_CPU, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
        signal.signal(signal.SIGXCPU, previous)


# -- raw YAML text ----------------------------------------------------------------------------------

SPEC_WORDS: Final = (
    "sparkc", "name", "cluster", "nodes", "fabric", "ip", "netdev", "hcas", "ssh", "head", "container",
    "image", "model", "path", "engine", "kind", "vllm", "sglang", "backend", "ray", "tensor_parallel", "env",
    "launch", "args", "mounts", "ulimits", "secrets", "architecture", "port", "gpus",
)  # fmt: skip
YAML_TOKENS: Final = (
    "- ", ": ", "? ", ",", "[", "]", "{", "}", "'", '"', "#", "|\n", ">-\n", "|+2\n", "&a ", "&b ", "*a", "*b",
    "!!str ", "!!int ", "!!float ", "!!bool ", "!!null ", "!!binary ", "!!timestamp ", "!!map ", "!!seq ",
    "!!set ", "!!omap ", "!!pairs ", "!foo ", "!<tag:x,1:y> ", "!!python/object:os.system ", "<<: ", "<<: *a",
    "%YAML 1.1\n", "%YAML 1.2\n", "%TAG !e! tag:e,1:\n", "---\n", "--- ", "...\n", "\n", "\r\n", "\r", " ", "  ",
    "    ", "\t", "\x00", "\x01", "\x07", "\x1b", "\x7f", "\x85", "\xa0", "\u2028", "\ufeff", "\U0001f600",
    "\\", "\\u0000", "\\ud800", "\\x85", "\\N", "~", "null", "true", "yes", "off", "0x1F", "0o17", "0b101",
    "1e400", "-.inf", ".nan", "1_000", "+12", "012", "2001-12-14", "2001-12-14 21:59:43.10 -5", "1", "-1", "0",
    "99999999999999999999999999", "3.14",
)  # fmt: skip
_text_atoms = st.text(st.characters(codec="utf-8"), max_size=6)
_tokens = st.sampled_from(YAML_TOKENS) | st.sampled_from(SPEC_WORDS) | _text_atoms


@st.composite
def nested(draw: st.DrawFn) -> str:
    """Deeply nested flow or block collections, sometimes cut off."""
    depth = draw(st.integers(1, 400))
    style = draw(st.sampled_from(["flow-seq", "flow-map", "block-seq", "block-map"]))
    if style == "flow-seq":
        text = "[" * depth + "1" + "]" * depth
    elif style == "flow-map":
        text = "{a: " * depth + "1" + "}" * depth
    elif style == "block-seq":
        text = "".join("  " * i + "-\n" for i in range(depth)) + "  " * depth + "- 1\n"
    else:
        text = "".join("  " * i + f"k{i}:\n" for i in range(depth)) + "  " * depth + "v: 1\n"
    cut = draw(st.integers(0, len(text)))
    return text if draw(st.booleans()) else text[:cut]


yaml_token_text = st.lists(_tokens, max_size=60).map("".join)
raw_yaml_text = yaml_token_text | nested() | st.text(max_size=200)

# -- random trees dumped as YAML --------------------------------------------------------------------

_plain_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20)
# Free text, with the characters that need care: lone surrogates (a YAML "\ud800"), NUL, NEL, U+2028.
_any_text = st.text(
    st.characters(codec="utf-8") | st.sampled_from("\ud800\udfff\x00\x85\u2028\t"), min_size=1, max_size=30
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([0, -1, 1, 65535, 65536, 2**31, 2**63, -(2**63), 10**30])
    | st.floats()
    | _plain_text
    | st.sampled_from(SPEC_WORDS)
)
_keys = st.sampled_from(SPEC_WORDS) | _plain_text | st.integers(-3, 3) | st.booleans() | st.none()
trees = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=5),
    max_leaves=40,
)


@st.composite
def dumped_trees(draw: st.DrawFn) -> str:
    """A random tree as YAML; with a subtree used twice sometimes, so the dump has an anchor and alias."""
    top = draw(st.dictionaries(st.sampled_from(SPEC_WORDS) | _plain_text, trees, max_size=8) | trees)
    if isinstance(top, dict) and top and draw(st.booleans()):
        shared = draw(st.lists(trees, min_size=1, max_size=3))
        for key in draw(st.lists(st.sampled_from(SPEC_WORDS), min_size=2, max_size=4)):
            top[key] = shared
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = draw(st.sampled_from([None, True, False]))
    yaml.allow_unicode = draw(st.booleans())
    yaml.width = draw(st.sampled_from([20, 80, 4096]))
    buf = io.StringIO()
    yaml.dump(top, buf)
    return buf.getvalue()


# -- edited examples --------------------------------------------------------------------------------

EXAMPLE_NAMES: Final = tuple(sorted(p.stem for p in EXAMPLES.glob("*.yaml")))
_EXAMPLES: Final = {name: example(name) for name in EXAMPLE_NAMES}


def paths(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """Every key and list item in a spec, as paths."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key)
            yield from paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield (*path, i)
            yield from paths(item, (*path, i))


def _parent(spec: Any, path: tuple[str | int, ...]) -> Any:
    node = spec
    for part in path[:-1]:
        node = node[part]
    return node


def boundary_numbers() -> st.SearchStrategy[Any]:
    return st.sampled_from(
        [0, -1, 1, 2, 7, 63, 64, 65, 119, 120, 1023, 1024, 65535, 65536, 78643199, 78643200, 2**31 - 1, 2**31,
         2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**30, -(2**63), 0.0, 0.5, 1.0, 1.5, -0.0, 1e-300, 5e-324,
         float("inf"), float("-inf"), float("nan"), True, False]
    )  # fmt: skip


@st.composite
def edit(draw: st.DrawFn, spec: dict[str, Any]) -> str:
    """Change `spec` in place in one random way; returns what was done, for the failure report."""
    path = draw(st.sampled_from(list(paths(spec))))
    parent, last = _parent(spec, path), path[-1]
    how = draw(st.sampled_from(["delete", "retype", "string", "number", "duplicate", "shuffle", "unknown", "nest"]))
    if how == "delete":
        del parent[last]
    elif how == "retype":
        parent[last] = draw(trees)
    elif how == "string":
        parent[last] = draw(_plain_text | _any_text)
    elif how == "number":
        parent[last] = draw(boundary_numbers())
    elif how == "duplicate" and isinstance(parent, list):
        parent.insert(draw(st.integers(0, len(parent))), copy.deepcopy(parent[last]))
    elif how == "duplicate":
        parent[draw(_plain_text)] = copy.deepcopy(parent[last])
    elif how == "shuffle" and isinstance(parent[last], list):
        parent[last] = draw(st.permutations(parent[last]))
    elif how == "unknown" and isinstance(parent[last], dict):
        parent[last][draw(_plain_text | st.sampled_from(SPEC_WORDS))] = draw(scalars)
    else:
        parent[last] = {"nested": parent[last]} if draw(st.booleans()) else [parent[last]]
    return f"{how} {'.'.join(map(str, path))}"


@st.composite
def edited_examples(draw: st.DrawFn) -> tuple[str, list[str], dict[str, Any]]:
    """An example after one to four random edits: (example name, the edits, the spec)."""
    name = draw(st.sampled_from(EXAMPLE_NAMES))
    spec = copy.deepcopy(_EXAMPLES[name])
    done = [draw(edit(spec)) for _ in range(draw(st.integers(1, 4))) if spec]
    return name, done, spec


def dump_text(spec: Any) -> str:
    """The spec as YAML text; strings the emitter cannot write plainly come out escaped."""
    buf = io.StringIO()
    YAML(typ="safe", pure=True).dump(spec, buf)
    return buf.getvalue()


def spec_file(directory: Path, text: str | bytes) -> Path:
    """Write a case's spec; text that is not valid UTF-8 (lone surrogates) goes as the bytes Python has."""
    path = directory / "spec.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    return path


# -- edits that keep an example valid, mostly ---------------------------------------------------------


def _regex(pattern: str) -> st.SearchStrategy[str]:
    """Text the schema's pattern takes; a quarter of it with a newline at the end, which Python's `$`
    (what jsonschema's patterns use) also takes."""
    text = st.from_regex(pattern, fullmatch=True)
    return st.one_of(text, text, text, text.map(lambda t: t + "\n"))


_word_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc", "Zl", "Zp"]), max_size=30)
_abspath = _regex(r"/[^\x00-\x1f:,]{0,30}")
_envname = _regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}")
_env = st.dictionaries(_envname, _word_text | st.integers() | st.floats() | st.booleans(), max_size=4)
_ssh_option = st.sampled_from(sorted(ALLOWED)).flatmap(lambda k: _regex(ALLOWED[k]).map(lambda v: f"{k}={v}"))
_ulimits = st.dictionaries(
    _regex(r"[a-z]{1,8}"), st.integers(-1, 2**40) | _regex(r"-?[0-9]{1,6}(:-?[0-9]{1,6})?") | st.none(), max_size=3
)
_port = st.integers(1, 65535)
# Per dotted key (N: a node's index): values the schema takes. The rules may still refuse some.
VALID_EDITS: Final[dict[str, st.SearchStrategy[Any]]] = {
    "name": _regex(r"[a-z][a-z0-9-]{0,38}[a-z0-9]"),
    "cluster.ssh.user": _regex(r"[a-z_][a-z0-9_.-]{0,20}"),
    "cluster.ssh.port": _port,
    "cluster.ssh.identity_file": _abspath,
    "cluster.ssh.connect_timeout": st.integers(1, 300),
    "cluster.ssh.options": st.lists(_ssh_option, max_size=3),
    "cluster.topology": st.sampled_from(["direct", "switch", "mesh", "ring"]),
    "cluster.nodes.N.ssh": _regex(r"[A-Za-z0-9][A-Za-z0-9.:-]{0,30}"),
    "cluster.nodes.N.env": _env,
    "container.entrypoint": st.sampled_from(["auto", "bypass", "adapt", "keep"]),
    "container.privileged": st.booleans(),
    "container.gpus": st.sampled_from(["all", "none"]),
    "container.ulimits": _ulimits,
    "container.mounts": st.lists(st.fixed_dictionaries({"host": _abspath, "container": _abspath}), max_size=2),
    "container.shm_size": _regex(r"[0-9]{1,12}[bkmg]?"),
    "container.env": _env,
    "container.secrets": st.lists(_envname, max_size=3),
    "model.path": _abspath,
    "model.mount": _abspath,
    "model.name": _any_text,
    "engine.port": _port,
    "engine.host": _any_text | st.sampled_from(["0.0.0.0", "::", "127.0.0.1", "fe80::1", "spark-a.local"]),
    "engine.max_model_len": st.integers(1, 2**63),
    "engine.gpu_memory_utilization": st.floats(0, 1, exclude_min=True) | boundary_numbers(),
    "engine.trust_remote_code": st.booleans(),
    "engine.reasoning_parser": _regex(r"[A-Za-z0-9_.-]{1,20}"),
    "engine.args": st.lists(_word_text | st.sampled_from(["--enforce-eager", "--port", "-tp", "--x=y"]), max_size=4),
    "engine.env": _env,
    "launch.timeout": st.integers(120, 2**63),
    "launch.ray_port": _port,
    "launch.master_port": _port,
    "launch.ray_object_store_memory": st.integers(78643200, 2**63),
    "launch.nccl_check": st.booleans(),
}


@st.composite
def valid_leaning_examples(draw: st.DrawFn) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """An example with one to four edits of values the schema takes: (example name, the edits, the spec)."""
    name = draw(st.sampled_from(EXAMPLE_NAMES))
    spec = _EXAMPLES[name]
    changes: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(sorted(VALID_EDITS)), min_size=1, max_size=4, unique=True)):
        node = str(draw(st.integers(0, len(spec["cluster"]["nodes"]) - 1)))
        changes[key.replace(".N.", f".{node}.")] = draw(VALID_EDITS[key])
    return name, changes, with_changes(spec, changes)
