"""From the plan to files: rendered, linted (shellcheck, bash -n), written or compared, and explained."""
