"""Reuse the provider harnesses (moto_server, the local GCE REST server, the fake) so the reaper
runs the same scenario against each backend. Importing everything brings their fixtures along.

The reaper judges a machine's age by the cloud's own launch time, so here moto_server runs under
libfaketime (Debian `faketime`): instances it launches carry a LaunchTime two days back, the
state a nightly reaper finds (`moto_clock.launched_now()` launches fresh ones). Only moto's clock
moves; metric timestamps are the ones the tests post, read back by the real client.
"""

import contextlib
import os
from pathlib import Path

import pytest

from tests.conftest import _serve, _venv_bin
from tests.providers.conftest import *  # noqa: F403 - fixtures and harness factories
from tests.providers.conftest import HARNESSES

FAKETIME_LIBS = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1", "/usr/lib/faketime/libfaketimeMT.so.1")
LAUNCHED_AGO = "-2d"


class MotoClock:
    """The offset of moto_server's clock, read by libfaketime on every clock call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.set(LAUNCHED_AGO)

    def set(self, offset: str) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(offset + "\n")
        os.replace(tmp, self.path)  # libfaketime never reads a half-written file

    @contextlib.contextmanager
    def launched_now(self):
        self.set("+0")
        try:
            yield
        finally:
            self.set(LAUNCHED_AGO)


@pytest.fixture(scope="session")
def moto_clock(tmp_path_factory) -> MotoClock:
    return MotoClock(tmp_path_factory.mktemp("moto-clock") / "offset")


@pytest.fixture(scope="session")
def moto_server(moto_clock):
    """A real moto_server whose clock runs two days behind (see the module docstring)."""
    lib = next((p for p in FAKETIME_LIBS if Path(p).exists()), None)
    if lib is None:
        pytest.fail("libfaketime is missing: apt-get install faketime (see .ci/run)")
    env = [f"LD_PRELOAD={lib}", f"FAKETIME_TIMESTAMP_FILE={moto_clock.path}", "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1"]
    yield from _serve(lambda port: ["env", *env, _venv_bin("moto_server"), "-H", "127.0.0.1", "-p", str(port)])


@pytest.fixture(params=sorted(HARNESSES))
def cloud(request):
    return HARNESSES[request.param](request)
