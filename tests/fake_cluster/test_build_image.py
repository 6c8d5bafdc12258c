"""build-image.sh: a recipe's build_args, imported as container.build, built on the head with docker build (the
fake docker records each build's words and answers the image ID, as docker does), the ID recorded beside the
scripts; then distribute.sh ships that image as for a pulled one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from compiler.tools.importer import import_recipe
from tests.fakes.cluster import FakeCluster
from tests.specs import DELETE, ROOT, with_changes

RECIPE = ROOT / "tests" / "recipes" / "public" / "eugr-glm-4.7-flash-mxfp4-build.yaml"
# A value a shell would expand or split: it must reach docker as one word, as written.
ODD = "a b $(touch /tmp/sparkc-build-ran) 'q' \"d\" ;"


def imported_spec(fake: FakeCluster, context: Path) -> dict[str, Any]:
    result = import_recipe(RECIPE.read_text(encoding="utf-8"), RECIPE.name)
    assert result.errors == ()
    spec = YAML(typ="safe").load(result.spec_text)
    assert spec["container"]["build"]["dockerfile"] == "Dockerfile.mxfp4"
    assert spec["container"]["build"]["args"] == {"PRE_TRANSFORMERS": "1", "VLLM_REF": "v0.11.1"}
    spec = with_changes(spec, {"container.build.context": str(context), "cluster.nodes.0.fabric": DELETE})
    spec["container"]["build"]["args"]["NOTE"] = ODD
    return fake.adapt(spec)


def test_the_recipes_image_is_built_on_the_head_and_its_id_recorded(fake: FakeCluster, tmp_path: Path) -> None:
    context = tmp_path / "spark-vllm-docker"
    context.mkdir()
    (context / "Dockerfile.mxfp4").write_text("FROM nvcr.io/nvidia/pytorch\nARG VLLM_REF\n", encoding="utf-8")
    fake.compile(imported_spec(fake, context))
    plan_page = (fake.build / "PLAN.md").read_text(encoding="utf-8")
    assert "run `build-image.sh` first, on the head" in plan_page and "`build-image.sh`" in plan_page

    dry = fake.run("build-image.sh", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "[spark-a] docker build \\\n    --tag vllm-node-mxfp4 \\\n" in dry.stdout
    assert f"    --file {context}/Dockerfile.mxfp4 \\\n    --build-arg PRE_TRANSFORMERS=1 \\\n" in dry.stdout
    assert "[spark-a] docker image inspect --format '{{.Id}}' vllm-node-mxfp4" in dry.stdout
    assert not (fake.state / "nodes" / "spark-a" / "builds.jsonl").exists()  # a dry run builds nothing

    done = fake.run("build-image.sh")
    assert done.returncode == 0, done.stdout + done.stderr
    head = (fake.state / "head").read_text().strip()
    builds = [json.loads(line) for line in (fake.state / "nodes" / head / "builds.jsonl").read_text().splitlines()]
    assert builds == [
        {
            "tags": ["vllm-node-mxfp4"],
            "build_args": ["PRE_TRANSFORMERS=1", "VLLM_REF=v0.11.1", f"NOTE={ODD}"],
            "file": str(context / "Dockerfile.mxfp4"),
            "context": str(context),
        }
    ]
    assert not Path("/tmp/sparkc-build-ran").exists()
    image = json.loads((fake.state / "nodes" / head / "images" / "vllm-node-mxfp4" / "meta.json").read_text())
    assert (fake.build / "built-image.txt").read_text() == f"vllm-node-mxfp4 {image['id']}\n"
    assert image["id"] in done.stdout and "run distribute.sh" in done.stdout


def test_a_missing_dockerfile_is_named_and_nothing_is_recorded(fake: FakeCluster, tmp_path: Path) -> None:
    context = tmp_path / "empty"
    context.mkdir()
    fake.compile(imported_spec(fake, context))
    done = fake.run("build-image.sh")
    assert done.returncode == 1
    assert f"{context}/Dockerfile.mxfp4 is missing" in done.stderr
    assert not (fake.build / "built-image.txt").exists()
    assert not any(argv[:1] == ["build"] for _, argv in fake.docker_calls())
