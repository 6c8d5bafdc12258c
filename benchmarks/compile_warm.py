"""One torch.compile of a small transformer, timed: run it twice in fresh processes with the same
TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR; the second start finds the first's compiled kernels.
This is what container.cache keeps across engine restarts (the engines' compile caches on the host).

    TORCHINDUCTOR_CACHE_DIR=/x/inductor TRITON_CACHE_DIR=/x/triton python benchmarks/compile_warm.py cold
    TORCHINDUCTOR_CACHE_DIR=/x/inductor TRITON_CACHE_DIR=/x/triton python benchmarks/compile_warm.py warm

Prints one JSON line. Needs a GPU; builds the model from a config (no download).
"""

from __future__ import annotations

import json
import os
import sys
import time


def model_and_input() -> tuple[object, object, str]:
    import torch

    try:
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(
            vocab_size=32000,
            hidden_size=1024,
            intermediate_size=2816,
            num_hidden_layers=8,
            num_attention_heads=16,
            num_key_value_heads=4,
            max_position_embeddings=2048,
        )
        model = LlamaForCausalLM(config).to("cuda", torch.bfloat16).eval()
        kind = "transformers LlamaForCausalLM (hidden 1024, 8 layers)"
    except ImportError:  # no transformers: the same size from torch alone
        layer = torch.nn.TransformerEncoderLayer(1024, 16, 2816, batch_first=True)
        model = torch.nn.TransformerEncoder(layer, 8).to("cuda", torch.bfloat16).eval()
        kind = "torch.nn.TransformerEncoder (hidden 1024, 8 layers)"
        return model, torch.randn(4, 256, 1024, device="cuda", dtype=torch.bfloat16), kind
    return model, torch.randint(0, 32000, (4, 256), device="cuda"), kind


def main(argv: list[str]) -> int:
    import torch

    label = argv[1] if len(argv) > 1 else "run"
    start = time.perf_counter()
    model, batch, kind = model_and_input()
    compiled = torch.compile(model)
    with torch.no_grad():
        compiled(batch)
        torch.cuda.synchronize()
    first = time.perf_counter() - start
    with torch.no_grad():
        t = time.perf_counter()
        compiled(batch)
        torch.cuda.synchronize()
        steady = time.perf_counter() - t
    print(
        json.dumps(
            {
                "run": label,
                "model": kind,
                "first_call_s": round(first, 2),
                "steady_call_ms": round(steady * 1000, 2),
                "torch": torch.__version__,
                "gpu": torch.cuda.get_device_name(0),
                "inductor_cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR", ""),
                "triton_cache": os.environ.get("TRITON_CACHE_DIR", ""),
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
