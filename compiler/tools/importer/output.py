"""What an import hands back: the spec, written as YAML with its placeholders marked, and the warnings about
what did not carry over, each at its line in the recipe."""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from compiler.diagnostics import Path, printable, show_key
from compiler.names import SECRET_NAME
from compiler.spec.load import kind_of, locate
from compiler.user_files import ascii_int

PLACEHOLDER = "PLACEHOLDER"
# A `{key}` the launcher fills from the recipe's defaults. sparkrun fills any key it has between braces, so a
# key may hold a hyphen or a dot (`{hf-overrides}`); a JSON object (`{"a": 1}`) names none. A doubled brace is
# left as written.
RECIPE_KEY = re.compile(r"(?<!\{)\{([\w.-]+)\}(?!\})")
# Nodes a recipe can ask for (one per GPU, at least min_nodes): spark-a to spark-z.
MAX_NODES = 26


class RecipeError(Exception):
    """The recipe cannot be read as a recipe at all."""


@dataclass(frozen=True)
class RecipeWarning:
    """What did not carry over, about one recipe key (`defaults.port`), at its line and column."""

    key: str
    message: str
    line: int = 0
    column: int = 0
    error: bool = False  # the spec would not do what the recipe does: nothing is written

    def __str__(self) -> str:
        return printable(f"{self.key}: {self.message}")


@dataclass(frozen=True)
class Imported:
    spec_text: str
    warnings: tuple[RecipeWarning, ...]  # errors among them (`error`): the spec must not be used as it is
    # Files to write beside the spec (path relative to its folder -> bytes): the mods' patch folder.
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def errors(self) -> tuple[RecipeWarning, ...]:
        return tuple(w for w in self.warnings if w.error)


class Notes(list[tuple[Path, str, bool, bool]]):
    """The warnings and errors as they are found: the recipe path each is about, the message, whether it is
    about the key (placed at the key) or its value (placed at the value), and whether it is an error."""

    def add(self, path: Path, message: str, at_key: bool = False) -> None:
        self.append((path, message, at_key, False))

    def error(self, path: Path, message: str, at_key: bool = False) -> None:
        self.append((path, message, at_key, True))


def imported(data: Any, filename: str, spec: Any, warnings: Notes, files: dict[str, bytes]) -> Imported:
    """The spec's text: a header, each warning as a comment at the top, then the spec; `data`: the recipe as
    read, with the positions the warnings are placed at."""
    out = io.StringIO()
    yaml = YAML()
    yaml.width = 200
    yaml.dump(spec, out)
    located = tuple(_located(data, *warning) for warning in warnings)
    header = f"Imported from {filename} by `sparkc import`; {PLACEHOLDER} marks what the recipe does not say."
    notes = "".join(f"# {'error' if w.error else 'warning'}: {w}\n" for w in located)
    return Imported(f"# {printable(header)}\n" + notes + out.getvalue(), located, files)


def _located(data: Any, path: Path, message: str, at_key: bool, error: bool) -> RecipeWarning:
    line, column = locate(data, path, at_key)
    return RecipeWarning(".".join(show_key(str(part)) for part in path), message, line, column, error)


def shown(value: Any) -> str:
    """A recipe's value in a warning: itself where it is short text or a number, else what kind it is."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or len(repr(value)) > 60:
        return kind_of(value)
    return repr(value)


def typed(value: Any, type_of: type) -> Any:
    """`value` as a spec field of type `type_of` takes it (a whole number may be written as text), or None."""
    if type_of is str:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return value if isinstance(value, str) else str(value) if number else None
    if isinstance(value, str) and ascii_int(value.strip()) is not None:
        value = ascii_int(value.strip())
    if type_of is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def write_spec(recipe: dict[str, Any], kind: str, fields: dict[str, Any], args: list[str], warnings: Notes) -> Any:
    """The spec: the fields read from the recipe, engine.args, and a marked placeholder for what it does not say."""
    model = recipe.get("model") or fields.pop("recipe.model", "")
    if not isinstance(model, str):
        warnings.add(("model",), f"{kind_of(model)}, not a Hugging Face id; left out: set model.name by hand")
        model = ""
    folder = model.rsplit("/", 1)[-1] or "model"
    in_defaults = isinstance(recipe.get("defaults"), dict) and "tensor_parallel" in recipe["defaults"]
    count = _count(recipe.get("min_nodes"), fields, in_defaults, warnings)
    spec = CommentedMap(sparkc=1, name=_name(str(recipe.get("name") or folder)))
    hcas = _recipe_hcas(recipe.get("env")) if count > 1 else None
    spec["cluster"] = CommentedMap(nodes=[_node(i, count > 1, hcas) for i in range(count)])
    spec["container"] = _container(recipe, fields, warnings)
    env = spec["container"].get("env")
    if hcas and env is not None:  # now each node's fabric.hcas, from which sparkc writes NCCL_IB_HCA
        env.pop("NCCL_IB_HCA", None)
        if not env:
            del spec["container"]["env"]
    spec["model"] = CommentedMap(path=f"/{PLACEHOLDER}/models/{folder}")
    spec["model"].yaml_add_eol_comment(
        printable(f"{PLACEHOLDER}: where {model or 'the weights'} sit on every node"), "path"
    )
    for key in ("mount", "name", "aliases", "revision", "draft"):
        if f"model.{key}" in fields:
            spec["model"][key] = fields[f"model.{key}"]
    if "name" not in spec["model"] and model:
        spec["model"]["name"] = model  # what the recipe's clients asked for: the Hugging Face id
    engine = CommentedMap(kind=kind)
    for target, value in fields.items():
        if target.startswith("engine."):
            engine[target.removeprefix("engine.")] = value
    if args:
        engine["args"] = args
    spec["engine"] = engine
    return spec


def _container(recipe: dict[str, Any], fields: dict[str, Any], warnings: Notes) -> CommentedMap:
    container = CommentedMap(image=recipe["container"])
    if "container.entrypoint" in fields:
        container["entrypoint"] = fields["container.entrypoint"]
    env, secrets = _env(recipe.get("env"), warnings)
    if env:
        container["env"] = env
    if secrets:
        container["secrets"] = secrets
    mounts = _volumes(recipe.get("volumes"), warnings)
    if mounts:
        container["mounts"] = mounts
    if "container.build" in fields:
        container["build"] = build = CommentedMap(fields["container.build"])
        build.yaml_add_eol_comment(
            f"{PLACEHOLDER}: a checkout of the recipe's repository on the head (build-image.sh builds there)", "context"
        )
    if "container.hooks" in fields:
        container["hooks"] = fields["container.hooks"]
    return container


def _volumes(raw: Any, warnings: Notes) -> list[CommentedMap]:
    """A recipe's `volumes` (docker's -v words, HOST:CONTAINER[:ro|rw], or a mapping of host to container
    folder) as container.mounts; docker mounts read-write unless told `ro`, and so does the spec here."""
    if raw is None:
        return []
    if isinstance(raw, dict):
        items: list[tuple[Path, Any]] = [(("volumes", key), f"{key}:{value}") for key, value in raw.items()]
    elif isinstance(raw, list):
        items = [(("volumes", i), value) for i, value in enumerate(raw)]
    else:
        warnings.error(("volumes",), f"{kind_of(raw)}; write a list of HOST:CONTAINER[:ro] folders")
        return []
    mounts = []
    for where, value in items:
        parts = value.split(":") if isinstance(value, str) else []
        mode = parts.pop() if len(parts) == 3 else "rw"
        # A host folder under ~/ stays so: the recipe's launcher has each node's shell expand it to the ssh
        # user's home there, and sparkc's launcher asks each node for that home.
        if len(parts) != 2 or mode not in {"ro", "rw"}:
            warnings.error(where, f"{shown(value)} is not HOST:CONTAINER[:ro|rw]; write it so")
        elif not (parts[0].startswith(("/", "~/")) and parts[1].startswith("/")):
            warnings.error(
                where,
                f"{shown(value)}: sparkc mounts a node's folder by its absolute path, not a named docker volume or "
                "a path relative to the launcher; write the folder's absolute path on every node",
            )
        else:
            mount = CommentedMap(host=parts[0], container=parts[1], readonly=mode == "ro")
            if parts[0].startswith("~/"):
                mount.yaml_add_eol_comment("~/ is the ssh user's home on each node", "readonly")
            mounts.append(mount)
    return mounts


def _count(min_nodes: Any, fields: dict[str, Any], from_defaults: bool, warnings: Notes) -> int:
    """Nodes to write: one per GPU the parallelism uses (a DGX Spark has one). A larger min_nodes is named:
    the engine would use only that many GPUs, and sparkc refuses nodes the layout leaves idle."""
    parallel = [fields.get(f"engine.{key}", 1) for key in ("tensor_parallel", "pipeline_parallel", "data_parallel")]
    gpus = math.prod(n if isinstance(n, int) and not isinstance(n, bool) else 1 for n in parallel)
    least = typed(min_nodes, int) if min_nodes is not None else 1
    if least is None:
        warnings.add(("min_nodes",), f"{shown(min_nodes)} is not a whole number; read as 1")
        least = 1
    count = max(gpus, 1)
    if least > count:
        warnings.add(
            ("min_nodes",),
            f"{least} nodes, but the command uses {count} GPU(s) (tensor x pipeline x data parallel): "
            f"{min(count, MAX_NODES)} node(s) written; to use more, raise engine.tensor_parallel and add the nodes",
        )
    if count > MAX_NODES:
        about = ("defaults", "tensor_parallel") if from_defaults else ("command",)
        warnings.add(
            about, f"needs more than {MAX_NODES} nodes; the first {MAX_NODES} are written: add the rest by hand"
        )
    return min(count, MAX_NODES)


def _node(index: int, several: bool, hcas: list[str] | None) -> CommentedMap:
    """A node the recipe does not describe: every address is a marked placeholder to replace. Of several
    nodes, each lists its RDMA devices: the recipe's NCCL_IB_HCA, else a placeholder (sockets are a choice)."""
    name = f"spark-{chr(ord('a') + index)}"
    node = CommentedMap(name=name)
    if index:
        node["ssh"] = f"{PLACEHOLDER}-{name}"
    node["fabric"] = CommentedMap(ip=f"192.168.100.{10 + index}", netdev="enp1s0f1np1")
    node.yaml_add_eol_comment(f"{PLACEHOLDER}: this node's CX-7 address and netdev", "fabric")
    if several:
        node["fabric"]["hcas"] = list(hcas or [PLACEHOLDER])
        why = "the recipe's NCCL_IB_HCA" if hcas else f"{PLACEHOLDER}: its CX-7 port's RDMA devices (ibdev2netdev)"
        node["fabric"].yaml_add_eol_comment(f"{why}; or transport: sockets for NCCL over TCP", "hcas")
    return node


def _recipe_hcas(env: Any) -> list[str] | None:
    """The RDMA devices a recipe's NCCL_IB_HCA names (=a,b:1 as hcas: [=a, b:1]); None where it names none
    that a spec can list (absent, or `^` excluding devices rather than naming them)."""
    value = env.get("NCCL_IB_HCA") if isinstance(env, dict) else None
    if not isinstance(value, str):
        return None
    exact = value.startswith("=")
    names = [n.strip() for n in value.removeprefix("=").split(",")]
    if not names or not all(re.fullmatch(r"[A-Za-z0-9_]+(:[0-9]+)?", n) for n in names):
        return None
    return [f"={names[0]}", *names[1:]] if exact else names


def _env(raw: Any, warnings: Notes) -> tuple[CommentedMap, list[str]]:
    env, secrets = CommentedMap(), []
    for name, value in (raw or {}).items() if isinstance(raw, dict) else []:
        if SECRET_NAME.search(str(name).upper()):
            secrets.append(str(name))
            warnings.add(
                ("env", name), "looks like a secret: listed under container.secrets (export it at launch)", at_key=True
            )
        else:
            env[str(name)] = value if isinstance(value, (str, int, float, bool)) else str(value)
    return env, secrets


def _name(text: str) -> str:
    """A deployment name sparkc accepts: lower-case letters, digits and '-', starting with a letter, <= 40."""
    name = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    name = name if name[:1].isalpha() else f"m-{name}"
    return name[:40].rstrip("-") or "imported"
