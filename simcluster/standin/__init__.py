"""Engine stand-in for the simulated cluster.

Invoked like the real engines (``vllm serve MODEL ...`` and ``python3 -m sglang.launch_server ...``);
parses their flags strictly, does the distributed part for real (Ray placement group, or a
torch.distributed gloo rendezvous) and serves a small OpenAI-shaped HTTP API. The harness copies this
package into the simulation venv as ``sparkc_standin`` (see ``simcluster/runtime.py``), so every
import inside it is relative.
"""
