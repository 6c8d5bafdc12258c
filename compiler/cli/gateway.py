"""`sparkc compile A.yaml B.yaml`'s gateway: its options, and writing (or checking) OUT/gateway/."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:  # imported where used: `sparkc --help` loads click and no more
    from compiler.pipeline import CompileResult, Gateway

# Kept here as literals (the CLI's help must not import the compiler); tests/unit/test_gateway.py checks that
# they are compiler/resolve/gateway.py's.
DEFAULT_PORT = 4000
DEFAULT_IMAGE = "ghcr.io/berriai/litellm:v1.89.4"
FOLDER = "gateway"

F = TypeVar("F", bound=Callable[..., Any])


def gateway_options(command: F) -> F:
    """--gateway-port, --gateway-image and --no-gateway, for `compile`."""
    command = click.option(
        "--no-gateway", is_flag=True, help="Several SPECs: write no gateway (OUT/gateway/) in front of them."
    )(command)
    command = click.option(
        "--gateway-mount",
        "gateway_mounts",
        multiple=True,
        callback=_mounts,
        metavar="HOST[:CONTAINER]",
        help="Several SPECs: a host folder or file the gateway's container also mounts, read-only (at the same "
        "path, or CONTAINER): certificates, a LiteLLM of your own. Repeatable.",
    )(command)
    command = click.option(
        "--gateway-image",
        default=DEFAULT_IMAGE,
        show_default=True,
        help="Several SPECs: the LiteLLM proxy image the gateway runs (a mirror of the pinned release).",
    )(command)
    return click.option(
        "--gateway-port",
        type=click.IntRange(1, 65535),
        default=None,
        help="Several SPECs: the port of the gateway, one OpenAI-compatible address for them all, on the first "
        f"deployment's head; it must not be a port of a deployment there. Default: {DEFAULT_PORT}, or the first "
        "port above it that no deployment uses there.",
    )(command)


def _mounts(_ctx: click.Context, _param: click.Parameter, given: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    mounts = []
    for word in given:
        host, _, container = word.partition(":")
        container = container or host
        for path in (host, container):
            if not path.startswith("/") or any(c in path for c in ":,\n") or path != path.strip():
                raise click.BadParameter(f"{word!r}: give absolute paths, HOST or HOST:CONTAINER (no ',' in them)")
        mounts.append((host, container))
    return tuple(mounts)


def compile_gateway(
    results: Sequence[CompileResult], port: int | None, image: str, *, wanted: bool, **options: Any
) -> tuple[list[CompileResult], Gateway | None]:
    """The results with the gateway's checks, and the gateway; the results as they are where none is `wanted`."""
    if not wanted:
        return list(results), None
    from compiler.pipeline import compile_gateway as compile_it

    return compile_it(results, port, image, **options)


def check_gateway_folder(gateway: Gateway | None, out_dir: Path) -> None:
    """OUT/gateway is a folder sparkc makes: a link there would take the gateway's files elsewhere."""
    if gateway is not None:
        from compiler.output.folder_guard import check_inside

        check_inside(out_dir, f"{FOLDER}/manifest.json")


def write_gateway(gateway: Gateway | None, out_dir: Path, check: bool, fmt: str) -> dict[str, dict[str, Any]]:
    """Write OUT/gateway/ (or compare it, --check); returns {"gateway": its JSON document}, {} without a gateway."""
    if gateway is None:
        return {}
    return {"gateway": _write(gateway, out_dir, check, fmt)}


def _write(gateway: Gateway, out_dir: Path, check: bool, fmt: str) -> dict[str, Any]:
    from compiler.output.emit import compare, emit

    out = out_dir / FOLDER
    if check:
        differences = [f"{d.name} ({d.kind})" for d in compare(gateway.files, out)]
        if fmt == "text":
            if differences:
                click.echo(f"{out} is not the gateway these specs compile to: {', '.join(differences)}", err=True)
            else:
                click.echo(f"{out} is up to date")
        return {"out": str(out), "up_to_date": not differences, "differences": differences}
    done = emit(gateway.files, out)
    if fmt == "text":
        click.echo(
            f"compiled the gateway -> {out}/ (start-gateway.sh, stop-gateway.sh, litellm-config.yaml, PLAN.md, "
            f"manifest.json): {gateway.plan.address}/v1 on {gateway.plan.node}"
        )
        click.echo(f"next: after the deployments' launch-cluster.sh, run {out}/start-gateway.sh on the head")
    return {"out": str(out), "written": sorted(gateway.files), **done.as_json()}
