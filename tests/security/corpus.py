"""The security corpus: every string a user can give sparkc, crossed with the payloads that would run code
or lose bytes if a value were ever spliced into shell code (or a command line) unquoted.

A field says how a payload is written into a spec and where the value must then arrive on the nodes,
exactly: as one word of `docker run`'s argv, as a container's environment value, as a word of ssh's
argv, or as a word of the engine command that Ray's head runs. A case is one field and one payload.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from compiler.resolve.rules.cluster import CONTROL, LINE_BREAKS

# A payload that manages to run `touch` creates this file: each case replaces the word with a path in
# its own folder and asserts, at the end, that nothing is there.
CANARY: Final = "CANARY"

PAYLOADS: Final[dict[str, str]] = {
    # quotes and the ways a shell would expand or split a word
    "squote": "it's",
    "dquote": 'say "hi"',
    "quote_escape": "a'\\''b",
    "subst": "$(id)",
    "var": "$HOME",
    "braces": "${PATH:0:1}",
    "backtick": "`id`",
    "semicolon": "a;b",
    "pipe": "a|b",
    "amp": "a&b",
    "redirect_in": "a<b",
    "redirect_out": "a>b",
    "space": "a b",
    "backslash": "a\\b",
    "backslash_end": "a\\",
    # line breaks and control characters (C0, DEL, C1, Unicode separators)
    "newline": "a\nb",
    "newline_end": "a\n",
    "cr": "a\rb",
    "tab": "a\tb",
    "nul": "a\x00b",
    "c0": "a\x01b",
    "escape_seq": "a\x1b[31mb",
    "del": "a\x7fb",
    "nel": "a\x85b",
    "csi": "a\x9bb",
    "u2028": "a\u2028b",
    "u2029": "a\u2029b",
    # other non-ASCII
    "latin": "café",
    "cjk": "日本",
    "emoji": "🚀",
    # words a program would read as something other than data
    "dash": "-x",
    "double_dash": "--privileged",
    "equals": "a=b",
    # a bare word whose `=` follows nothing, digits, `+` or `@` is what shellcheck reads as a mistaken
    # assignment (SC1097 after `NAME=`, SC2191 in an array): the lint gate must not call it a bug
    "equals_start": "=a=b",
    "equals_digits": "1=x+=y",
    "star": "*",
    "question": "a?",
    "bracket": "[ab]",
    "tilde": "~",
    "tilde_user": "~root/x",
    "dotdot": "../../etc/passwd",
    "empty": "",
    "long": "a" * 5000,
    # payloads that leave a trace if they ever run
    "canary_subst": f"$(touch {CANARY})",
    "canary_backtick": f"`touch {CANARY}`",
    "canary_squote": f"'; touch {CANARY} #",
    "canary_dquote": f'"; touch {CANARY} #',
    "canary_newline": f"x\ntouch {CANARY}",
    "canary_nonascii": f"é'; touch {CANARY} #",  # printf %q wrote $'...' for é, which dash reads as text
    "canary_all_quotes": f"'\"`$(touch {CANARY})`\"'",
}

# Values of the base specs that fields are written next to.
NATIVE: Final = "llama33-70b-2spark-native"  # vLLM's own multi-node mode, NGC image: the engine is argv
RAY: Final = "seed-qwen35-122b-2spark-ray"  # Ray, an image whose entrypoint reads the engine's settings
NATIVE_MODEL_PATH: Final = "/home/aurora/models/Llama-3.3-70B-Instruct"
RAY_MODEL_PATH: Final = "/home/aurora/models/Qwen3.5-122B-A10B-FP8"
WORKER_HCA_2: Final = "roceP2p1s0f0"
ENV_NAME: Final = "SPARKC_PAYLOAD"  # the variable a payload value is given under
SECRET_NAME: Final = "HF_TOKEN"
SECRET_SAMPLE: Final = "hf_secret-sample"  # the value given to a secret whose name is the payload


@dataclass(frozen=True)
class Arrival:
    """Where a value must show up on the nodes, exactly.

    word: one word of `docker run`'s argv; env: the container's environment, `key` -> text; ssh: one
    word of ssh's argv; engine: one word of the command Ray's head runs in its container; host: what a
    host hook wrote to the file `key`, one line per node it ran on."""

    kind: Literal["word", "env", "ssh", "engine", "host"]
    text: str
    key: str = ""
    workers_only: bool = False  # only the worker is expected to have it (a per-node setting)


def unprintable(value: str) -> bool:
    """A control character or a line separator: refused in every field of a spec, whatever it reaches."""
    return bool(CONTROL.search(value) or LINE_BREAKS.search(value))


def bad_scope(value: str) -> bool:
    """An IPv6 address whose scope id (after '%') is not an interface name or number."""
    return unprintable(value) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,15}", value.partition("%")[2])


def _arg(value: str) -> str:
    """A user's value in engine.args, as the value of a flag that takes any text."""
    return f"--chat-template={value}"


def word(text: str, workers_only: bool = False) -> Arrival:
    return Arrival("word", text, workers_only=workers_only)


def env(key: str, text: str, workers_only: bool = False) -> Arrival:
    return Arrival("env", text, key=key, workers_only=workers_only)


def ssh(text: str) -> Arrival:
    return Arrival("ssh", text)


def engine(text: str) -> Arrival:
    return Arrival("engine", text)


def host_hook(payload: str) -> str:
    """A host hook (cluster.hooks.pre_launch) that writes the payload, single-quoted by the user as shell
    code would be written, to a file beside the canary: the hook is shell code by design, so what must
    hold is that it reaches each host's sh exactly as written and runs exactly that."""
    return f"printf '%s\\n' '{payload.replace(chr(39), chr(39) + chr(92) + chr(39) + chr(39))}' >> {CANARY}-host"


def host(command: str) -> list[Arrival]:
    """The payload of host_hook(), read back from the command as a POSIX shell reads it."""
    words = shlex.split(command)
    return [Arrival("host", words[2], key=words[-1])]


@dataclass(frozen=True)
class Field:
    """A string a user writes: its name, the spec path diagnostics must point into, how a written value
    changes the base spec, and where the value arrives."""

    id: str
    path: tuple[str | int, ...]
    changes: Callable[[str], dict[str, Any]]
    arrives: Callable[[str], list[Arrival]]
    base: str = NATIVE
    wrap: Callable[[str], str] = field(default=lambda p: p)  # the payload as written (inside a path, ...)
    secret: Literal["", "name", "value"] = ""
    keep_secrets: bool = False
    refused: Callable[[str], bool] = unprintable  # values (as written) that must be refused, not delivered


def _set(dotted: str) -> Callable[[str], dict[str, Any]]:
    return lambda v: {dotted: v}


FIELDS: Final[tuple[Field, ...]] = (
    Field("name", ("name",), _set("name"), lambda v: [word(f"sparkc.deployment={v}")]),
    Field(
        "nodes.1.name",
        ("cluster", "nodes", 1, "name"),
        _set("cluster.nodes.1.name"),
        lambda v: [word(f"sparkc.node={v}", workers_only=True)],
    ),
    Field("nodes.1.ssh", ("cluster", "nodes", 1, "ssh"), _set("cluster.nodes.1.ssh"), lambda v: [ssh(f"aurora@{v}")]),
    Field(
        "nodes.1.fabric.ip",
        ("cluster", "nodes", 1, "fabric", "ip"),
        _set("cluster.nodes.1.fabric.ip"),
        lambda v: [env("VLLM_HOST_IP", v, workers_only=True)],
    ),
    Field(
        "nodes.1.fabric.ip.scope",  # an IPv6 link-local address names its interface after '%'
        ("cluster", "nodes", 1, "fabric", "ip"),
        _set("cluster.nodes.1.fabric.ip"),
        lambda v: [env("VLLM_HOST_IP", v, workers_only=True)],
        wrap=lambda p: f"fe80::1%{p}",
        refused=bad_scope,
    ),
    Field(
        "nodes.1.fabric.netdev",
        ("cluster", "nodes", 1, "fabric", "netdev"),
        _set("cluster.nodes.1.fabric.netdev"),
        lambda v: [env("NCCL_SOCKET_IFNAME", v, workers_only=True)],
    ),
    Field(
        "nodes.1.fabric.hcas.0",
        ("cluster", "nodes", 1, "fabric", "hcas"),
        _set("cluster.nodes.1.fabric.hcas.0"),
        lambda v: [env("NCCL_IB_HCA", f"{v},{WORKER_HCA_2}", workers_only=True)],
    ),
    Field(
        "cluster.hooks.pre_launch.0",
        ("cluster", "hooks", "pre_launch"),
        lambda v: {"cluster.hooks": {"pre_launch": [v]}},
        host,
        wrap=host_hook,
    ),
    Field("ssh.user", ("cluster", "ssh", "user"), _set("cluster.ssh.user"), lambda v: [ssh(f"{v}@spark-b.local")]),
    Field(
        "ssh.identity_file",
        ("cluster", "ssh", "identity_file"),
        _set("cluster.ssh.identity_file"),
        lambda v: [ssh(v)],
        wrap=lambda p: f"/home/aurora/.ssh/{p}",
    ),
    Field(
        "ssh.options.0",
        ("cluster", "ssh", "options"),
        lambda v: {"cluster.ssh.options": [v]},
        lambda v: [ssh(v)],
        wrap=lambda p: f"CertificateFile=/tmp/{p}",  # a path option that leaves host key checking as it is
    ),
    Field("image", ("container", "image"), _set("container.image"), lambda v: [word(v)]),
    Field(
        "mounts.0.host",
        ("container", "mounts", 0, "host"),
        _set("container.mounts.0.host"),
        lambda v: [word(f"{v}:/root/.cache/vllm")],
        wrap=lambda p: f"/srv/{p}",
    ),
    Field(
        "mounts.0.container",
        ("container", "mounts", 0, "container"),
        _set("container.mounts.0.container"),
        lambda v: [word(f"/home/aurora/.cache/vllm:{v}")],
        wrap=lambda p: f"/srv/{p}",
    ),
    Field(
        "cache.host",
        ("container", "cache", "host"),
        lambda v: {"container.cache": {"enabled": True, "host": v}},  # the native example keeps it off
        lambda v: [word(f"{v}:/var/cache/sparkc")],
        wrap=lambda p: f"/srv/cache/{p}",
    ),
    Field("shm_size", ("container", "shm_size"), _set("container.shm_size"), lambda v: [word(v)]),
    Field("container.env.key", ("container", "env"), lambda v: {"container.env": {v: "x"}}, lambda v: [env(v, "x")]),
    Field(
        "container.env.value",
        ("container", "env"),
        lambda v: {"container.env": {ENV_NAME: v}},
        lambda v: [env(ENV_NAME, v)],
    ),
    Field("engine.env.key", ("engine", "env"), lambda v: {"engine.env": {v: "x"}}, lambda v: [env(v, "x")]),
    Field("engine.env.value", ("engine", "env"), lambda v: {"engine.env": {ENV_NAME: v}}, lambda v: [env(ENV_NAME, v)]),
    Field(
        "nodes.1.env.key",
        ("cluster", "nodes", 1, "env"),
        lambda v: {"cluster.nodes.1.env": {v: "x"}},
        lambda v: [env(v, "x", workers_only=True)],
    ),
    Field(
        "nodes.1.env.value",
        ("cluster", "nodes", 1, "env"),
        lambda v: {"cluster.nodes.1.env": {ENV_NAME: v}},
        lambda v: [env(ENV_NAME, v, workers_only=True)],
    ),
    Field(
        "secrets.0.name",
        ("container", "secrets"),
        lambda v: {"container.secrets": [v]},
        lambda v: [env(v, SECRET_SAMPLE)],
        secret="name",
    ),
    Field(
        "secret.value",  # typed into the launcher's environment, never into the spec
        ("container", "secrets"),
        lambda v: {},
        lambda v: [env(SECRET_NAME, v)],
        secret="value",
        keep_secrets=True,
    ),
    Field(
        "model.path",
        ("model", "path"),
        _set("model.path"),
        lambda v: [word(f"{v}:{v}:ro"), word(v)],  # no mount given: the same path inside
        wrap=lambda p: f"/srv/models/{p}",
    ),
    Field(
        "model.mount",
        ("model", "mount"),
        _set("model.mount"),
        lambda v: [word(f"{NATIVE_MODEL_PATH}:{v}:ro"), word(v)],
        wrap=lambda p: f"/models/{p}",
    ),
    Field("model.name", ("model", "name"), _set("model.name"), lambda v: [word(v)]),
    Field("engine.host", ("engine", "host"), _set("engine.host"), lambda v: [word(v)]),
    Field(
        "engine.reasoning_parser", ("engine", "reasoning_parser"), _set("engine.reasoning_parser"), lambda v: [word(v)]
    ),
    # As a flag's value (`--chat-template=VALUE`): a word alone is refused at compile (vLLM would not take it).
    Field("engine.args.0", ("engine", "args"), lambda v: {"engine.args": [_arg(v)]}, lambda v: [word(_arg(v))]),
    # Ray: the engine runs by `docker exec` on the head, and this image's entrypoint reads some settings
    # from the environment (entrypoint: adapt).
    Field("ray.model.name", ("model", "name"), _set("model.name"), lambda v: [engine(v)], base=RAY),
    Field(
        "ray.engine.args.0",
        ("engine", "args"),
        lambda v: {"engine.args": [_arg(v)]},
        lambda v: [engine(_arg(v))],
        base=RAY,
    ),
    Field("ray.engine.host", ("engine", "host"), _set("engine.host"), lambda v: [env("HOST", v)], base=RAY),
    Field(
        "ray.engine.reasoning_parser",
        ("engine", "reasoning_parser"),
        _set("engine.reasoning_parser"),
        lambda v: [engine(v)],
        base=RAY,
    ),
    Field(
        "ray.model.mount",
        ("model", "mount"),
        _set("model.mount"),
        lambda v: [env("MODEL_PATH", v), word(f"{RAY_MODEL_PATH}:{v}:ro")],
        base=RAY,
        wrap=lambda p: f"/models/{p}",
    ),
    Field(
        "ray.container.env.value",
        ("container", "env"),
        lambda v: {"container.env": {ENV_NAME: v}},
        lambda v: [env(ENV_NAME, v)],
        base=RAY,
    ),
)


@dataclass(frozen=True)
class Case:
    field: Field
    payload: str  # the payload's name

    @property
    def id(self) -> str:
        return f"{self.field.id}-{self.payload}"

    def value(self, canary: str) -> str:
        """The value as the user writes it, with the canary's path in place."""
        return self.field.wrap(PAYLOADS[self.payload]).replace(CANARY, canary)


def possible(f: Field, payload: str) -> bool:
    """An environment variable cannot hold a NUL byte: no one can give a secret that does."""
    return not (f.secret == "value" and "\x00" in PAYLOADS[payload])


def cases() -> Iterator[Case]:
    for f in FIELDS:
        for payload in PAYLOADS:
            if possible(f, payload):
                yield Case(f, payload)
