"""``python -m sparkc_standin vllm ...`` / ``python -m sparkc_standin sglang ...``."""

from __future__ import annotations

import sys

from . import sglang_cli, trtllm_cli, vllm_cli


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["vllm"]:
        return vllm_cli.main(args[1:])
    if args[:1] == ["sglang"]:
        return sglang_cli.main(args[1:])
    if args[:1] == ["trtllm-serve"]:
        return trtllm_cli.serve_main(args[1:])
    if args[:1] == ["trtllm-llmapi-launch"]:
        return trtllm_cli.launch_main(args[1:])
    print("usage: python -m sparkc_standin {vllm|sglang|trtllm-serve|trtllm-llmapi-launch} ARGS...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
