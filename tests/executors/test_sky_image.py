"""Every image_id form a SkyPilot task accepts means one image for both backends: the task we
generate carries it as the real `sky.Task` (0.14.1) reads it, and the local backend runs the same
reference (without SkyPilot's `docker:` prefix)."""

from __future__ import annotations

import pytest

from launcher.executors.base import ExecRequest
from launcher.executors.container import bare_ref
from launcher.executors.sky import task_config
from launcher.providers.base import ClusterHandle, Node
from launcher.spec import load_spec_text

sky = pytest.importorskip("sky")


def _spec(image_yaml: str):
    return load_spec_text(f"resources: {{image_id: {image_yaml}}}\nrun: python train.py\n").spec


def _sky_image(image: str | None, tmp_path) -> dict:
    req = ExecRequest(run_id="r-1", attempt=1, run_dir=tmp_path, workdir=None, setup=None, run="true", num_nodes=1,
                      gpus_per_node=0, image_id=image)  # fmt: skip
    h = ClusterHandle("c1", "aws", "us-east-1", None, (Node("i-1", "10.0.0.1", 0),), extra={"ssh_user": "ubuntu"})
    task = sky.Task.from_yaml_config(task_config(req, h))
    (res,) = list(task.resources)
    return res.image_id


@pytest.mark.parametrize(
    ("image_yaml", "region", "want"),
    [
        ("'docker:localhost/bb:1'", "us-east-1", "localhost/bb:1"),
        ("'localhost/bb:1'", "us-east-1", "localhost/bb:1"),
        ("'docker:nvcr.io/nvidia/pytorch:24.08-py3'", "local", "nvcr.io/nvidia/pytorch:24.08-py3"),
        ("{us-east-1: 'docker:img:east', us-west-2: 'docker:img:west'}", "us-west-2", "img:west"),
        ("{us-east-1: 'docker:img:east', us-west-2: 'docker:img:west'}", "local", "img:east"),
    ],
)
def test_one_image_for_both_backends(image_yaml, region, want, tmp_path):
    image = _spec(image_yaml).resources.image_for(region)
    assert bare_ref(image) == want  # what podman/docker run locally
    got = _sky_image(image, tmp_path)
    assert list(got.values()) == [f"docker:{want}"]  # what SkyPilot pulls on the cluster


@pytest.mark.parametrize("bad", ["'docker:'", "'docker:Bad/UPPER:1'", "{}", "'a b'"])
def test_an_image_no_runtime_could_use_is_refused_at_parse(bad):
    from launcher.errors import SpecError

    with pytest.raises(SpecError) as err:
        _spec(bad)
    assert "image_id" in str(err.value.message)
