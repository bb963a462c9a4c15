import os

import pytest

from tests.conftest import SHARED_DATA
from tests.pricing.helpers import small_data


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    """../shared/data when present, else small generated files of the same shape
    (LAUNCHER_TEST_SMALL_DATA=1 forces the generated files)."""
    use_shared = SHARED_DATA.is_dir() and not os.environ.get("LAUNCHER_TEST_SMALL_DATA")
    return SHARED_DATA if use_shared else small_data(tmp_path_factory.mktemp("small-data"))
