"""The stand-in's /metrics, counting its real requests and tokens, in the shape of the engine it stands in for.

vLLM: Prometheus text, gauges and counters labelled model_name and engine (one sample per data-parallel
engine), each counter with its `_created` sample. SGLang: Prometheus text labelled model_name, served only
under --enable-metrics. TensorRT-LLM (trtllm-serve): a JSON list of iteration statistics, taken away by
each read.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

# (sample name, kind, help) per engine: running, waiting, KV cache share, prompt tokens, generated tokens.
_NAMES = {
    "vllm": (
        ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches."),
        ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed."),
        ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage."),
        ("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed."),
        ("vllm:generation_tokens_total", "counter", "Number of generation tokens processed."),
    ),
    "sglang": (
        ("sglang:num_running_reqs", "gauge", "The number of running requests."),
        ("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue."),
        ("sglang:token_usage", "gauge", "The token usage."),
        ("sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed."),
        ("sglang:generation_tokens_total", "counter", "Number of generation tokens processed."),
    ),
}


@dataclass
class _Engine:
    running: int = 0
    prompt: int = 0
    generation: int = 0
    kv_tokens: int = 0  # tokens the running requests hold in the KV cache


@dataclass
class Metrics:
    engine: str  # "vllm", "sglang" or "trtllm"
    model_name: str
    kv_capacity: int  # tokens the KV cache holds (the stand-in's max_model_len per engine)
    engines: int = 1  # vLLM's data-parallel engines behind the one API server
    created: float = field(default_factory=time.time)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _next: int = 0
    _per_engine: list[_Engine] = field(default_factory=list)
    _iterations: list[dict[str, object]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._per_engine = [_Engine() for _ in range(max(1, self.engines))]

    def start(self, prompt_tokens: int) -> int:
        """A request admitted: the engine it runs on (round robin, as the front end balances)."""
        with self._lock:
            index = self._next % len(self._per_engine)
            self._next += 1
            e = self._per_engine[index]
            e.running += 1
            e.kv_tokens += prompt_tokens
            return index

    def finish(self, index: int, prompt_tokens: int, generated: int) -> None:
        with self._lock:
            e = self._per_engine[index]
            e.running -= 1
            e.kv_tokens -= prompt_tokens
            e.prompt += prompt_tokens
            e.generation += generated
            if self.engine == "trtllm":
                self._iterations.append(self._iteration(len(self._iterations)))

    def _iteration(self, n: int) -> dict[str, object]:
        # The few fields of trtllm-serve's iteration statistics a reader looks at first.
        active = sum(e.running for e in self._per_engine)
        return {
            "iter": n,
            "iterLatencyMS": 1.0,
            "numActiveRequests": active,
            "numQueuedRequests": 0,
            "numCompletedRequests": 1,
            "maxNumActiveRequests": 256,
            "gpuMemUsage": 0,
            "timestamp": time.strftime("%m-%d-%Y %H:%M:%S"),
            "kvCacheStats": {"maxNumBlocks": self.kv_capacity // 32, "usedNumBlocks": 0, "tokensPerBlock": 32},
        }

    def content_type(self) -> str:
        return "application/json" if self.engine == "trtllm" else "text/plain; version=0.0.4; charset=utf-8"

    def render(self) -> bytes:
        with self._lock:
            if self.engine == "trtllm":
                taken, self._iterations = self._iterations, []
                return json.dumps(taken).encode()
            return self._prometheus().encode()

    def _prometheus(self) -> str:
        running, waiting, kv, prompt, generation = _NAMES[self.engine]
        per = self._per_engine
        rows: list[str] = []

        def family(spec: tuple[str, str, str], values: list[float]) -> None:
            name, kind, help_text = spec
            # As prometheus_client writes the text format: a counter's HELP, TYPE and sample with _total,
            # then its _created samples as a gauge of their own.
            base = name.removesuffix("_total")
            rows.extend((f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"))
            for i, value in enumerate(values):
                rows.append(f"{name}{{{self._labels(i)}}} {float(value)!r}")
            if kind == "counter":
                rows.extend((f"# HELP {base}_created {help_text}", f"# TYPE {base}_created gauge"))
                rows.extend(f"{base}_created{{{self._labels(i)}}} {self.created!r}" for i in range(len(values)))

        family(running, [e.running for e in per])
        family(waiting, [0 for _ in per])
        family(kv, [min(1.0, e.kv_tokens / self.kv_capacity) if self.kv_capacity else 0.0 for e in per])
        family(prompt, [e.prompt for e in per])
        family(generation, [e.generation for e in per])
        return "\n".join(rows) + "\n"

    def _labels(self, index: int) -> str:
        name = self.model_name.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        if self.engine == "vllm":
            return f'engine="{index}",model_name="{name}"'
        return f'model_name="{name}"'
