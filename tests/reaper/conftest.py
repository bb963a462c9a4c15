"""Reuse the provider harnesses (moto_server, the local GCE REST server, the fake) so the reaper
runs the same scenario against each backend. Importing everything brings their fixtures along."""

import pytest

from tests.providers.conftest import *  # noqa: F403 - fixtures and harness factories
from tests.providers.conftest import HARNESSES


@pytest.fixture(params=sorted(HARNESSES))
def cloud(request):
    return HARNESSES[request.param](request)
