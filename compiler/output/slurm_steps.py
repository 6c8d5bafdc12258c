"""The Slurm batch script's steps around the containers that only some deployments have: cluster.hooks on
each node's host before the containers start, and under Ray the engine started in the head's container once
Ray's cluster is whole. Both do what the ssh target's launcher does (runtime/hooks.sh, runtime/launch.sh),
with the same values: the hook commands as the spec wrote them, the Ray check and the engine's wrapper read
from the library's own files, the engine's words from the plan.
"""

from __future__ import annotations

import re
from functools import cache

from compiler.output.bash_words import inline, lines, quote
from compiler.output.library import single_quoted
from compiler.plan import Plan
from compiler.resources import data_dir
from compiler.spec.typed import Backend

# Between two asks of Ray on the head: its client is slow to start and costs the engine CPU.
RAY_PAUSE = 2
_RAY_CHECK = re.compile(r"^readonly SPARKC_RAY_CHECK_PY='([^']*)'$", re.M)


@cache
def ray_check_program() -> str:
    """The Python the ssh launcher runs in the head's container to ask Ray for its nodes (runtime/common.sh)."""
    found = _RAY_CHECK.search((data_dir("runtime") / "common.sh").read_text(encoding="utf-8"))
    if found is None:
        raise ValueError("runtime/common.sh no longer defines SPARKC_RAY_CHECK_PY as one single-quoted word")
    return found.group(1)


@cache
def engine_wrapper() -> str:
    """The sh script the ssh launcher starts the engine through under Ray (runtime/node/engine-wrapper.sh)."""
    return (data_dir("runtime") / "node" / "engine-wrapper.sh").read_text(encoding="utf-8")


def step_values(plan: Plan) -> list[str]:
    """The lines of sparkc_values that set what these steps read; empty arrays where the deployment has no
    such step."""
    hooks = plan.host_hooks
    values = [
        ("SPARKC_HOST_HOOKS", inline(hooks.pre_launch if hooks else ())),
        ("SPARKC_HOST_HOOKS_SUDO", quote(bool(hooks and hooks.sudo))),
    ]
    ray = plan.backend is Backend.RAY and bool(plan.ray_engine)
    values.append(("SPARKC_ENGINE", f"(\n{lines(plan.ray_engine, 4)}\n  )" if ray else "()"))
    values.append(("SPARKC_RAY_HEAD", quote(f"{plan.head_fabric_ip}:{plan.ray_port}" if ray else "")))
    if ray:
        values += [
            ("SPARKC_RAY_IPS", inline(plan.ray_expected_ips)),
            ("SPARKC_TOTAL_GPUS", quote(plan.total_gpus)),
            ("SPARKC_RAY_PAUSE", quote(RAY_PAUSE)),
            # the library's own texts (no value of the spec), written as the library writes them
            ("SPARKC_RAY_CHECK_PY", single_quoted(ray_check_program())),
        ]
    written = [f"{name}={value}" for name, value in values]
    if ray:
        written += [
            "# shellcheck disable=SC2016  # expanded by the container's sh",
            f"SPARKC_ENGINE_WRAPPER={single_quoted(engine_wrapper())}",
        ]
    return written


# Functions named to sparkc_task_body travel to the tasks as their text; the batch shell expands nothing in them.
STEPS_CODE = r"""# cluster.hooks.pre_launch on this node's host, in order, by sh -c (through sudo -n where the spec
# asks), as the ssh launcher runs them; the first that fails ends the step, naming the node and the command.
sparkc_host_hooks() {
  sparkc_me || return 1
  local i out status runner=() node=${SPARKC_NODES[SPARKC_ME]}
  ((SPARKC_HOST_HOOKS_SUDO)) && runner=(sudo -n)
  for i in "${!SPARKC_HOST_HOOKS[@]}"; do
    status=0
    out=$("${runner[@]}" sh -c "${SPARKC_HOST_HOOKS[i]}" 2>&1 </dev/null) || status=$?
    if ((status)); then
      out=$(printf '%s\n' "$out" | tail -n 5)
      sparkc_log "host hook pre_launch[$i] failed on $node with status $status:" \
        "${SPARKC_HOST_HOOKS[i]}${out:+ (it said: $out)}"
      return 1
    fi
    sparkc_log "$node: host hook pre_launch[$i] done"
  done
}

# Under Ray, a worker's container starts once the head's Ray port answers on its fabric address (a worker's
# ray start needs the head's), within launch.timeout: the ssh launcher starts the head's wave first likewise.
sparkc_wait_ray_head() {
  local deadline=$((SECONDS + SPARKC_TIMEOUT))
  [[ -n $SPARKC_RAY_HEAD && ${SPARKC_NODES[SPARKC_ME]} != "$SPARKC_HEAD" ]] || return 0
  sparkc_log "waiting for the Ray head at $SPARKC_RAY_HEAD"
  # shellcheck disable=SC2016  # expanded by the inner bash
  until timeout 3 bash -c 'exec 3<>"/dev/tcp/${1%:*}/${1##*:}"' - "$SPARKC_RAY_HEAD" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      sparkc_log "the Ray head did not open $SPARKC_RAY_HEAD within ${SPARKC_TIMEOUT}s"
      return 1
    fi
    sleep 1
  done
}

# Under Ray, on the head: once Ray reports every node and GPU alive on the addresses expected (the ssh
# launcher's check), the engine starts in the head's container by docker exec through the library's wrapper,
# detached: the container (ray start --block) outlives it, and removing the container ends it.
sparkc_ray_engine() {
  local out=""
  sparkc_log "waiting until Ray reports ${#SPARKC_RAY_IPS[@]} nodes and $SPARKC_TOTAL_GPUS GPU(s) alive"
  until out=$(docker exec "$SPARKC_CONTAINER" python3 -c "$SPARKC_RAY_CHECK_PY" \
    "${#SPARKC_RAY_IPS[@]}" "$SPARKC_TOTAL_GPUS" "${SPARKC_RAY_IPS[@]}" 2>&1); do
    if ((SECONDS >= SPARKC_DEADLINE)); then
      sparkc_log "Ray did not form within ${SPARKC_TIMEOUT}s: ${out##*$'\n'}"
      return 1
    fi
    sleep "$SPARKC_RAY_PAUSE"
  done
  sparkc_log "${out##*$'\n'}"
  sparkc_log "starting the engine in $SPARKC_CONTAINER"
  if ! docker exec -d "$SPARKC_CONTAINER" sh -c "$SPARKC_ENGINE_WRAPPER" sparkc-engine "${SPARKC_ENGINE[@]}" \
    >/dev/null; then
    sparkc_log "could not start the engine in $SPARKC_CONTAINER"
    return 1
  fi
}

# Under Ray: whether the engine started by docker exec has ended (its wrapper records how); says so.
sparkc_engine_ended() {
  local code
  ((${#SPARKC_ENGINE[@]})) || return 1
  code=$(docker exec "$SPARKC_CONTAINER" cat /tmp/sparkc-engine.exit 2>/dev/null) || return 1
  sparkc_log "the engine in $SPARKC_CONTAINER exited with status $code (its log is above)"
}

# The step on the head: under Ray the engine's start, then the endpoint's readiness, both within launch.timeout.
sparkc_head_task() {
  sparkc_me || return 1
  SPARKC_CONTAINER=${SPARKC_CONTAINERS[SPARKC_ME]}
  SPARKC_DEADLINE=$((SECONDS + SPARKC_TIMEOUT))
  if ((${#SPARKC_ENGINE[@]})); then
    sparkc_ray_engine || return 1
  fi
  sparkc_wait_ready
}

"""
