"""One vocabulary of cloud names (pricing.clouds): the clouds a launch can run on are exactly
those with a provider, aliases resolve in one place."""

from launcher.providers import registry
from pricing.clouds import CATALOG_CLOUDS, DETECTABLE_CLOUDS, PROVIDER_CLOUDS, canonical_cloud


def test_known_clouds_are_the_registered_providers():
    registered = set(registry.names()) - {"fake"}  # tests/conftest.py registers the fake provider
    assert set(registry.KNOWN_CLOUDS) == registered and len(registry.KNOWN_CLOUDS) == len(registered)
    assert set(PROVIDER_CLOUDS) <= set(DETECTABLE_CLOUDS) and set(CATALOG_CLOUDS) - set(PROVIDER_CLOUDS) == {"azure", "lambda", "runpod"}


def test_aliases():
    assert [canonical_cloud(n) for n in (" K8s", "google", "amazon", "lambdalabs", "AWS", "nope")] == [
        "kubernetes", "gcp", "aws", "lambda", "aws", "nope"
    ]
