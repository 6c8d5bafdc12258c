"""The spec: the YAML read with positions, its schema, included files, the typed spec, and what is
read beside it (image profiles, the weights' facts, a hooks patch folder)."""
