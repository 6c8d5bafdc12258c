#!/bin/sh
# Runs inside the container (a pre_engine hook): applies every *.patch of this folder to the installed vLLM.
set -eu
site=$(python3 -c 'import os, vllm; print(os.path.dirname(os.path.dirname(vllm.__file__)))')
for p in /sparkc/patches/*.patch; do
  [ -e "$p" ] || continue
  echo "applying $p in $site"
  patch -d "$site" -p1 --forward < "$p" || true
done
