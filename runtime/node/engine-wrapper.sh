# The engine under Ray, in the head's container (sh -c SCRIPT sparkc-engine ENGINE-WORDS...): it records its
# pid, writes SPARKC_RAY_NON_CARRY_OVER where vLLM reads the variables its Ray executor must leave to each
# worker (each node's own netdev, RDMA devices, GID), runs the engine with its output in the container's log,
# and records how the engine ended, in the log and in /tmp/sparkc-engine.exit.
echo "$$" >/tmp/sparkc-engine.pid
rm -f /tmp/sparkc-engine.exit
if [ -n "${SPARKC_RAY_NON_CARRY_OVER:-}" ]; then
  mkdir -p "$VLLM_CONFIG_ROOT" &&
    printf "%s\n" "$SPARKC_RAY_NON_CARRY_OVER" >"$VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json"
fi
"$@" >>/proc/1/fd/1 2>>/proc/1/fd/2
code=$?
echo "sparkc: engine exited with status $code" >>/proc/1/fd/2
echo "$code" >/tmp/sparkc-engine.exit
