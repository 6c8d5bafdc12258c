"""The resolver's rules: each reads the Deployment and reports diagnostics; none builds the plan."""
