"""The one builder from a cluster request to the Pulumi program's spec (used by provision and by
the dry-run resource plan)."""

from __future__ import annotations

from launcher.providers.base import ClusterRequest
from launcher.providers.stack_backed import infra_spec_for
from pricing.models import Offer
from tests.infra.helpers import make_tags

AWS_OFFER = Offer("aws", "us-east-1", "use1-az4", "g6.xlarge", "L4", 1, 4, 16, 24, True, 0.3, 0.8)
GCP_OFFER = Offer("gcp", "us-central1", "us-central1-a", "g2-standard-4", "L4", 1, 4, 16, 24, True, 0.3, 0.8)


def request(offer, **kw) -> ClusterRequest:
    return ClusterRequest(cluster="c1", offer=offer, num_nodes=2, tags=make_tags("c1"), disk_size_gib=300, ssh_allowed_cidr="10.1.2.3/32", **kw)


def test_aws_endpoint_from_the_environment_reaches_the_pulumi_provider():
    spec = infra_spec_for(request(AWS_OFFER), env={"AWS_ENDPOINT_URL": "http://127.0.0.1:5999"})
    assert spec.aws.endpoints and set(spec.aws.endpoints.values()) == {"http://127.0.0.1:5999"}
    assert spec.aws.skip_credentials_validation is True
    assert (spec.num_nodes, spec.disk_size_gib, spec.zone, spec.ssh_allowed_cidr) == (2, 300, "use1-az4", "10.1.2.3/32")


def test_without_an_endpoint_the_real_aws_is_used():
    spec = infra_spec_for(request(AWS_OFFER), env={})
    assert not spec.aws.endpoints


def test_gcp_project_from_the_environment_unless_given():
    assert infra_spec_for(request(GCP_OFFER), env={"GOOGLE_CLOUD_PROJECT": "p-env"}).gcp_project == "p-env"
    assert infra_spec_for(request(GCP_OFFER), env={"GOOGLE_CLOUD_PROJECT": "p-env"}, gcp_project="p-arg").gcp_project == "p-arg"
