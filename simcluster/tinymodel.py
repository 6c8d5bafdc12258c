"""A tiny random-weight Llama model that vLLM can serve on CPU, made offline and deterministically.

Nothing is downloaded: the tokenizer is a byte-level BPE trained here on a few sentences, the weights
are drawn from fixed seeds. The result (~1 MB) is a normal Hugging Face model directory:
config.json, model.safetensors, tokenizer.json and a tokenizer_config.json with a chat template, so
vLLM's /v1/completions and /v1/chat/completions both work.

Building needs torch, transformers and tokenizers: they are in the vLLM venv (install_vllm.sh), so
``make_tiny_model`` runs the build there when the calling interpreter lacks them.

    python simcluster/tinymodel.py DEST        (with the vLLM venv's python)
    python -m simcluster.tinymodel DEST
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Bump when anything below changes what is written: older directories are then rebuilt.
MODEL_VERSION = "1"
MARKER = ".sparkc-tiny-model"  # written last: its presence means the directory is complete
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")

SEED = 1234
HIDDEN_SIZE = 128
INTERMEDIATE_SIZE = 256
NUM_LAYERS = 2
NUM_HEADS = 2
MAX_POSITIONS = 512
VOCAB_TARGET = 512  # an upper bound: a corpus this small runs out of merges before it

BOS, EOS, PAD = "<s>", "</s>", "<pad>"
CORPUS = (
    "The quick brown fox jumps over the lazy dog.",
    "sparkc compiles a YAML spec into bash scripts that launch vLLM across GPU nodes.",
    "Each node runs docker, and the head node starts the inference server.",
    "Hello! How are you today? I am a tiny language model with random weights.",
    "The cluster has four nodes, each with one GPU and a fast network.",
    "Tensor parallel and pipeline parallel sizes must match the number of GPUs.",
    "user: what is the capital of France? assistant: Paris is the capital of France.",
    "Numbers like 0 1 2 3 4 5 6 7 8 9 10 100 1000 appear in text too.",
)
# A minimal role-tagged template; it only has to render, the model's answers are noise anyway.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def is_complete(dest: Path) -> bool:
    """True when ``dest`` holds a finished model of this MODEL_VERSION."""
    marker = dest / MARKER
    try:
        if marker.read_text().strip() != MODEL_VERSION:
            return False
    except OSError:
        return False
    return all((dest / name).is_file() for name in REQUIRED_FILES)


def make_tiny_model(dest: Path, python: str | os.PathLike[str] | None = None) -> Path:
    """Create the tiny model in ``dest`` unless it is already there and complete; return ``dest``.

    ``python``: the interpreter to build with. Default: this one when it has torch, transformers and
    tokenizers, else the vLLM venv's (which install_vllm.sh provides).
    """
    dest = Path(dest).absolute()
    if is_complete(dest):
        return dest
    if python is None and _can_build_here():
        _build_atomically(dest)
        return dest
    if python is None:
        from .vllm_cpu import vllm_python  # only here: run as a script, this file stands alone

        python = vllm_python()
    # -I: keep this file's directory (simcluster, full of short module names) off sys.path.
    subprocess.run([str(python), "-I", str(Path(__file__).resolve()), str(dest)], check=True)
    if not is_complete(dest):
        raise RuntimeError(f"building the tiny model in {dest} left it incomplete")
    return dest


def _can_build_here() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers", "tokenizers"))


def _build_atomically(dest: Path) -> None:
    """Build in a sibling temporary directory and rename it into place, so a reader (or a concurrent
    builder) never sees a half-written model."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        _build(tmp)
        (tmp / MARKER).write_text(MODEL_VERSION + "\n")
        # mkdtemp makes 0700 and transformers writes the weights 0600: containers may read them
        # as another user.
        os.chmod(tmp, 0o755)
        for path in tmp.iterdir():
            os.chmod(path, 0o644)
        if dest.exists() and not is_complete(dest):
            shutil.rmtree(dest)  # a stale or older version
        try:
            os.rename(tmp, dest)
        except OSError:
            if not is_complete(dest):  # anything but "another builder finished first" is an error
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _build(out: Path) -> None:
    # Imported here: the module is imported by tests whose interpreter has none of these.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the "Writing model shards" bar is noise in test logs

    vocab_size = _write_tokenizer(out)
    ids = json.loads((out / "tokenizer.json").read_text())["model"]["vocab"]

    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=ids[BOS],
        eos_token_id=ids[EOS],
        pad_token_id=ids[PAD],
        tie_word_embeddings=False,
        dtype="bfloat16",
    )
    # bfloat16: what vLLM's CPU backend computes in anyway (float32 weights get cast, with a warning each).
    model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    model.save_pretrained(out)  # safetensors is the default format
    if not (out / "model.safetensors").is_file():
        raise RuntimeError(f"transformers wrote no model.safetensors in {out}")

    # Load it back the way vLLM will, so a broken tokenizer or template fails here, not in a test.
    tok = AutoTokenizer.from_pretrained(out)
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "Hello!"}], tokenize=False, add_generation_prompt=True
    )
    if not prompt.endswith("<|assistant|>\n") or len(tok) != vocab_size:
        raise RuntimeError(f"tokenizer check failed: {prompt!r}, {len(tok)} != {vocab_size}")


def _write_tokenizer(out: Path) -> int:
    """Train the byte-level BPE, write tokenizer.json and tokenizer_config.json; return vocab size.

    The config is written by hand (not by transformers) so the chat template is in
    tokenizer_config.json whatever the transformers version prefers.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_TARGET,
        special_tokens=[BOS, EOS, PAD],
        # All 256 byte symbols, so any text encodes, not just the corpus's characters.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS, trainer=trainer)
    tokenizer.save(str(out / "tokenizer.json"))

    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "model_max_length": MAX_POSITIONS,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": BOS, "eos_token": EOS, "pad_token": PAD}, indent=2) + "\n"
    )
    return tokenizer.get_vocab_size(with_added_tokens=True)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: tinymodel.py DEST", file=sys.stderr)
        return 2
    dest = Path(argv[0]).absolute()
    if is_complete(dest):
        print(f"{dest}: already complete")
        return 0
    if _can_build_here():
        _build_atomically(dest)
        print(f"{dest}: built")
    elif __package__:
        make_tiny_model(dest)  # through the vLLM venv's python, which reports
    else:
        print(
            "tinymodel.py needs torch, transformers and tokenizers: run it with the vLLM venv's python",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
