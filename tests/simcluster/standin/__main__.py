"""``python -m sparkc_standin vllm ...`` / ``python -m sparkc_standin sglang ...``."""

from __future__ import annotations

import sys

from . import sglang_cli, vllm_cli


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["vllm"]:
        return vllm_cli.main(args[1:])
    if args[:1] == ["sglang"]:
        return sglang_cli.main(args[1:])
    print("usage: python -m sparkc_standin {vllm|sglang} ARGS...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
