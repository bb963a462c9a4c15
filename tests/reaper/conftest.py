"""Reuse the provider harnesses (moto_server, the local GCE REST server, the fake) so the reaper
runs the same scenario against each backend."""

from tests.providers.conftest import HARNESSES, gce, gce_server  # noqa: F401 - fixtures

import pytest


@pytest.fixture(params=sorted(HARNESSES))
def cloud(request):
    return HARNESSES[request.param](request)
