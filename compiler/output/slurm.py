"""`sparkc compile --target slurm`: the plan as one Slurm batch script, slurm/NAME.sbatch.

The job asks for the spec's nodes by name, one task on each; every task runs its node's `docker run` words
from the plan (NodePlan.docker_run, checked by compiler/output/docker_words.py), so a node's container is
the ssh target's. The values are written into a function at compile time and each task picks its own node's
by its Slurm node name when it runs: the batch shell never expands a per-node value. Readiness is checked on
the head as the ssh launcher checks it (/health, /v1/models, a one-token completion, within launch.timeout).
cluster.hooks run on each node's host as a step before the containers start, and under Ray the engine starts
in the head's container once Ray's cluster is whole (compiler/output/slurm_steps.py), as the ssh launcher does.
What else the ssh launcher does around the containers (preflight, the fabric probe, NCCL's transport check, the
image's entrypoint check, dropping the page cache) has no counterpart here.
"""

from __future__ import annotations

import json

from compiler.diagnostics import Diagnostic, error
from compiler.output.bash_words import comment, inline, lines, quote, split_runs
from compiler.output.docker_words import read_docker_run
from compiler.output.folder_guard import SLURM
from compiler.output.library import runtime_functions
from compiler.output.slurm_steps import STEPS_CODE, step_values
from compiler.plan import Plan
from compiler.spec.typed import Backend

FOLDER = SLURM
TARGET = "--target slurm"
# The job's time is launch.timeout to start, then this long serving. The spec has no field for it: sbatch's
# own --time on its command line overrides the script's line.
SERVING_SECONDS = 24 * 3600
# Between two rounds of the readiness probes on the head.
PROBE_PAUSE = 5


def sbatch_file(plan: Plan) -> str:
    return f"{FOLDER}/{plan.name}.sbatch"


def refusals(plan: Plan) -> list[Diagnostic]:
    """What this plan needs that one batch job of docker containers cannot give, at the spec field asking."""
    found = []
    if plan.backend is Backend.MPI:
        found.append(
            error(
                ("engine", "backend"),
                f"{TARGET}: backend mpi starts the ranks by mpirun over ssh between the containers, each running "
                "sshd, which this job does not set up; use --target ssh for this engine",
            )
        )
    if plan.hooks is not None and plan.hooks.patches:
        found.append(
            error(
                ("container", "hooks", "patches"),
                f"{TARGET}: the ssh target's launcher copies the patch folder to every node; this job copies "
                "nothing (put the files in the image, or use --target ssh)",
            )
        )
    if plan.model.hf == "ref":
        found.append(
            error(
                ("model", "revision"),
                f"{TARGET}: the ssh target's launcher reads the commit of {plan.model.revision} on every node; "
                "the job mounts the snapshot itself: give the commit",
            )
        )
    gpus = sorted({node.gpus for node in plan.nodes})
    if len(gpus) > 1:
        found.append(
            error(
                ("cluster", "nodes"),
                f"{TARGET}: the nodes have {' and '.join(map(str, gpus))} GPUs; one job asks for the same number "
                "on every node (--gpus-per-node): use --target ssh",
            )
        )
    return found


# The ssh launcher's own functions that send the API key to curl (runtime/common.sh): the key as a header
# read from stdin, refused when it holds a control character (a line of curl's config of its own).
API_CURL = ("api_key", "has_control", "api_key_problem", "api_curl")


def render_slurm(plan: Plan) -> dict[str, str]:
    curl = "# The API key sent as the ssh launcher sends it (its library's functions).\n"
    code = _BODY + curl + runtime_functions("common.sh", API_CURL) + "\n" + STEPS_CODE + _MAIN
    return {sbatch_file(plan): _header(plan) + _values(plan) + code}


def slurm_time(seconds: int) -> str:
    """Seconds as sbatch's --time reads days, hours, minutes and seconds (D-HH:MM:SS)."""
    minutes, secs = divmod(seconds, 60)
    hours, mins = divmod(minutes, 60)
    days, hrs = divmod(hours, 24)
    return f"{days}-{hrs:02d}:{mins:02d}:{secs:02d}"


def job_seconds(plan: Plan) -> int:
    return plan.launch_timeout + SERVING_SECONDS


def _header(plan: Plan) -> str:
    secrets = " ".join(plan.secrets)
    lines = [
        "#!/bin/bash",
        f"# Written by sparkc compile --target slurm from {comment(plan.spec_path)}; compile again rather than edit.",
        f"# {comment(plan.name)}: {plan.engine_kind} on {len(plan.nodes)} node(s), head {plan.head}, "
        f"API {comment(plan.endpoint_url)}/v1.",
        f"# Submit: sbatch {sbatch_file(plan)}; stop: scancel JOBID (every node's container is removed).",
        f"# --time: launch.timeout ({plan.launch_timeout}s) to start, then {SERVING_SECONDS // 3600} hours of "
        "serving (sparkc's default;",
        "# the spec has no field for it): `sbatch --time=D-HH:MM:SS` overrides it.",
        "# Slurm's node names must be the spec's node names; each node needs docker and the image, as for the",
        "# ssh target.",
    ]
    if plan.host_hooks is not None:
        hooks = plan.host_hooks
        runs_as = "root through sudo -n: the job's user needs it without a password" if hooks.sudo else "the job's user"
        lines.append(
            f"# cluster.hooks ({len(hooks.pre_launch)} command(s)) run on each node's host as a step before the "
            f"containers, as {runs_as}."
        )
    if plan.home_mounts:
        lines.append("# container.mounts under ~/ are in the job's user's home on each node: the task's HOME.")
    if secrets:
        lines.append(
            f"# Secrets ({secrets}): export them before sbatch; srun passes them to every task, whose docker run "
            "reads them. Never written here."
        )
    lines += [
        f"#SBATCH --job-name={plan.name}",
        f"#SBATCH --nodes={len(plan.nodes)}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={plan.nodes[0].gpus}",
        f"#SBATCH --nodelist={','.join(node.name for node in plan.nodes)}",
        f"#SBATCH --time={slurm_time(job_seconds(plan))}",
        "set -uo pipefail",
        "",
    ]
    return "\n".join(lines) + "\n"


def _values(plan: Plan) -> str:
    """The function that sets every compile-time value; it travels to each task with the code that reads it."""
    for node in plan.nodes:
        read_docker_run(node.docker_run, plan.image)  # an option another runtime would not know: a bug, raised
    runs = split_runs((node.docker_run for node in plan.nodes), plan.image)
    own = "\n".join(
        f"    # {node.name}, rank {node.rank}\n{lines(groups, 4)}"
        for node, groups in zip(plan.nodes, runs.own, strict=True)
    )
    assignments = [
        ("SPARKC_NODES", inline(n.name for n in plan.nodes)),
        ("SPARKC_CONTAINERS", inline(n.container_name for n in plan.nodes)),
        ("SPARKC_RANKS", inline(n.rank for n in plan.nodes)),
        ("SPARKC_RUN_SHARED", f"(\n{lines(runs.shared, 4)}\n  )"),
        ("SPARKC_RUN_OWN", f"(\n{own}\n  )"),
        ("SPARKC_RUN_SPANS", inline(runs.spans)),
        ("SPARKC_SECRETS", inline(plan.secrets)),
        ("SPARKC_HEAD", quote(plan.head)),
        ("SPARKC_PROBE_URL", quote(plan.probe_url)),
        ("SPARKC_ENDPOINT", quote(plan.endpoint_url)),
        ("SPARKC_SERVED_MODEL", quote(plan.served_model_name)),
        ("SPARKC_SERVED_MODEL_JSON", quote(json.dumps(plan.served_model_name, ensure_ascii=False))),
        (
            "SPARKC_PROBE_BODY",
            quote(json.dumps({"model": plan.served_model_name, "prompt": "ping", "max_tokens": 1}, ensure_ascii=False)),
        ),
        ("SPARKC_API_KEY_VAR", quote(plan.api_key_variable)),
        ("SPARKC_API_KEY_GIVEN", quote(plan.api_key_given)),
        ("SPARKC_TIMEOUT", quote(plan.launch_timeout)),
        ("SPARKC_PROBE_PAUSE", quote(PROBE_PAUSE)),
    ]
    body = "\n".join(
        [*(f"  {name}={value}" for name, value in assignments), *(f"  {line}" for line in step_values(plan))]
    )
    return (
        "# The deployment's values, by node in the spec's order (head first). Each task picks its own node's by its\n"
        "# Slurm node name (SLURMD_NODENAME), never by SLURM_NODEID: Slurm numbers the allocated nodes in the order\n"
        "# of its node table, not of --nodelist. The docker run words: those every node's has, then the node's own\n"
        "# (START COUNT in SPARKC_RUN_OWN), as the ssh target's launcher joins them.\n"
        f"sparkc_values() {{\n{body}\n}}\n\n"
    )


# The script's code, the same for every deployment. Functions run in srun's tasks travel as their text
# (`declare -f`) inside a single-quoted-equivalent `bash -c` body: nothing in them is expanded by the batch
# shell, so each task expands SLURMD_NODENAME, SLURM_NODEID and SLURM_PROCID itself.
_BODY = r"""sparkc_log() { printf '%s sparkc: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
warn() { sparkc_log "WARNING: $*"; }

# SPARKC_ME: this node's index in SPARKC_NODES, by its Slurm node name.
sparkc_me() {
  local i
  for i in "${!SPARKC_NODES[@]}"; do
    if [[ ${SPARKC_NODES[i]} == "${SLURMD_NODENAME:-}" ]]; then
      SPARKC_ME=$i
      return 0
    fi
  done
  sparkc_log "Slurm node ${SLURMD_NODENAME:-?} is none of this deployment's nodes (${SPARKC_NODES[*]}):" \
    "Slurm's node names must be the spec's"
  return 1
}

# One task per node: its container, started as the ssh target starts it, and the task stays while it runs,
# its log in the job's output. However the task ends (SIGTERM from scancel or the time limit, a failure),
# the container is removed.
sparkc_node_task() {
  sparkc_me || return 1
  local span=${SPARKC_RUN_SPANS[SPARKC_ME]} code i
  local run=("${SPARKC_RUN_SHARED[@]}" "${SPARKC_RUN_OWN[@]:${span% *}:${span#* }}")
  # A mount under ~/: the home of the job's user, this task's HOME (srun passes on the job's environment),
  # where the ssh target puts each node's ssh user's home.
  for i in "${!run[@]}"; do
    if ((i > 0)) && [[ ${run[i - 1]} == -v && ${run[i]} == \~/* ]]; then
      if [[ ${HOME:-} != /* || $HOME == *[:,[:cntrl:]]* ]]; then
        sparkc_log "container.mounts under ~/ are in the job's home, but HOME is not an absolute path without" \
          "':', ',' or control characters: $(printf '%q' "${HOME:-}")"
        return 1
      fi
      run[i]=$HOME/${run[i]#\~/}
    fi
  done
  SPARKC_CONTAINER=${SPARKC_CONTAINERS[SPARKC_ME]}
  sparkc_log "${SPARKC_NODES[SPARKC_ME]} (Slurm node ${SLURM_NODEID:-?}, task ${SLURM_PROCID:-?}):" \
    "rank ${SPARKC_RANKS[SPARKC_ME]}, container $SPARKC_CONTAINER"
  # A container of this name is one an earlier job of this deployment left (killed before its cleanup).
  docker rm -f "$SPARKC_CONTAINER" >/dev/null 2>&1 || true
  # The removal ignores further signals (its docker too): Slurm may signal a step again while it ends.
  trap 'trap "" TERM INT; docker rm -f "$SPARKC_CONTAINER" >/dev/null 2>&1 || true' EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
  sparkc_wait_ray_head || return 1
  "${run[@]}" >/dev/null || return 1
  docker logs -f "$SPARKC_CONTAINER" 2>&1 &
  code=$(docker wait "$SPARKC_CONTAINER") || return 1
  sparkc_log "container $SPARKC_CONTAINER ended with exit status $code"
  [[ $code =~ ^[0-9]+$ ]] || code=1
  return "$code"
}

# Removes this node's container, where a task could not (the cleanup after the batch script fails).
sparkc_remove() {
  sparkc_me || return 1
  docker rm -f "${SPARKC_CONTAINERS[SPARKC_ME]}" >/dev/null 2>&1 || true
}

# On the head: the endpoint answers /health, lists the served model and completes one token, within
# launch.timeout; else it fails saying what it still waits for.
sparkc_wait_ready() {
  local deadline=${SPARKC_DEADLINE:-$((SECONDS + SPARKC_TIMEOUT))} want stage="" problem
  problem=$(api_key_problem)
  if [[ -n $problem ]]; then
    sparkc_log "$problem"
    return 1
  fi
  while :; do
    if sparkc_engine_ended; then
      return 1
    elif ! api_curl -fsS --max-time 10 -o /dev/null "$SPARKC_PROBE_URL/health" 2>/dev/null; then
      want=/health
    elif ! api_curl -fsS --max-time 10 "$SPARKC_PROBE_URL/v1/models" 2>/dev/null |
      grep -qF -- "$SPARKC_SERVED_MODEL_JSON"; then
      want="/v1/models naming $SPARKC_SERVED_MODEL"
    elif ! api_curl -fsS --max-time 60 -o /dev/null -H 'Content-Type: application/json' -d "$SPARKC_PROBE_BODY" \
      "$SPARKC_PROBE_URL/v1/completions" 2>/dev/null; then
      want="a completion"
    else
      return 0
    fi
    if [[ $want != "$stage" ]]; then
      stage=$want
      sparkc_log "waiting for $want at $SPARKC_PROBE_URL ($((deadline - SECONDS))s left)"
    fi
    if ((SECONDS >= deadline)); then
      sparkc_log "not ready within ${SPARKC_TIMEOUT}s: still waiting for $want"
      return 1
    fi
    sleep "$SPARKC_PROBE_PAUSE"
  done
}

"""

# The batch shell's own part: the steps, one after the other, and the cleanup.
_MAIN = r"""# The text a task's `bash -c` runs: the values, the helpers and the functions named, then the first of them.
sparkc_task_body() {
  declare -f sparkc_values sparkc_log sparkc_me "$@"
  printf 'sparkc_values\n%s\n' "$1"
}

# Every node's container, one task per node; a task that fails ends the others. srun takes the place of
# the shell that runs this (exec), so that the process started in the background is srun itself, which
# passes signals on to the tasks.
sparkc_start_nodes() {
  exec srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c "$(sparkc_task_body sparkc_node_task sparkc_wait_ray_head)"
}

sparkc_cleanup() {
  local status=$?
  trap - EXIT
  trap '' TERM INT # a second signal must not cut the cleanup short
  if [[ -n ${SPARKC_STEP:-} ]] && kill -0 "$SPARKC_STEP" 2>/dev/null; then
    kill -TERM "$SPARKC_STEP" 2>/dev/null # srun passes it to every task: each removes its container
    wait "$SPARKC_STEP" 2>/dev/null
  fi
  [[ -z ${SPARKC_READY:-} ]] || kill -TERM "$SPARKC_READY" 2>/dev/null
  # Where a task was killed before its own cleanup. Once the job is being cancelled Slurm starts no new
  # step: then the tasks, signalled themselves, have removed their containers.
  srun --overlap --ntasks-per-node=1 bash -c "$(sparkc_task_body sparkc_remove)" >/dev/null 2>&1 || true
  exit "$status"
}

sparkc_main() {
  local name
  sparkc_values
  for name in "${SPARKC_SECRETS[@]}"; do
    if [[ -z ${!name:-} ]]; then
      sparkc_log "the secret $name is not set: export it before sbatch (srun passes it to every node's task)"
      return 2
    fi
  done
  trap sparkc_cleanup EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
  if ((${#SPARKC_HOST_HOOKS[@]})); then
    sparkc_log "running cluster.hooks.pre_launch on every node's host (${#SPARKC_HOST_HOOKS[@]} command(s))"
    srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c "$(sparkc_task_body sparkc_host_hooks)" || return 1
  fi
  sparkc_log "starting ${#SPARKC_NODES[@]} container(s) on ${SPARKC_NODES[*]} (job ${SLURM_JOB_ID:-?})"
  sparkc_start_nodes &
  SPARKC_STEP=$!
  srun --overlap --nodes=1 --ntasks=1 --nodelist="$SPARKC_HEAD" \
    bash -c "$(sparkc_task_body sparkc_head_task sparkc_ray_engine sparkc_engine_ended sparkc_wait_ready warn \
      api_key has_control api_key_problem api_curl)" &
  SPARKC_READY=$!
  while kill -0 "$SPARKC_READY" 2>/dev/null; do
    if ! kill -0 "$SPARKC_STEP" 2>/dev/null; then
      sparkc_log "a node's container ended before the endpoint was ready (its log is above)"
      return 1
    fi
    sleep 2
  done
  if ! wait "$SPARKC_READY"; then
    SPARKC_READY=""
    return 1
  fi
  SPARKC_READY=""
  sparkc_log "READY: $SPARKC_SERVED_MODEL at $SPARKC_ENDPOINT/v1, until the job ends (scancel ${SLURM_JOB_ID:-JOBID})"
  wait "$SPARKC_STEP"
}

# Sourced (the tests), it only defines the functions.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  sparkc_main
fi
"""
