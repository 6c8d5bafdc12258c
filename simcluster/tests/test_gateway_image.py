"""The gateway's LiteLLM test image is started as LiteLLM's release image is: the same working folder,
entrypoint and default command, so the docker run that start-gateway.sh writes works on both."""

from __future__ import annotations

import io
import json
import tarfile

from simcluster import images
from simcluster.runtime import LITELLM_VENV


def test_the_litellm_image_is_modelled_on_the_release_image() -> None:
    base = images.Layer("sha256:" + "0" * 64, 0, data=b"")
    image = images.litellm_image(base)
    config = json.loads(image.config)["config"]
    assert config["WorkingDir"] == "/app"
    assert config["Entrypoint"] == ["docker/prod_entrypoint.sh"]  # relative to /app, as the release image's
    assert config["Cmd"] == ["--port", "4000"]
    assert image.tag == images.LITELLM_IMAGE and images.LITELLM_IMAGE in images.IMAGES
    layer = image.layers[1]
    assert layer.data is not None
    with tarfile.open(fileobj=io.BytesIO(layer.data)) as tar:
        member = tar.getmember("app/docker/prod_entrypoint.sh")
        script = tar.extractfile(member)
        assert script is not None and member.mode == 0o755
        text = script.read().decode()
    assert text.endswith(f'exec {LITELLM_VENV}/bin/litellm "$@"\n')  # the command's words, as LiteLLM's script
