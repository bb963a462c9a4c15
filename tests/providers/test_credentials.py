"""Where each provider says it found credentials, and region/project discovery."""

from __future__ import annotations

import json

import pytest

from launcher.providers.aws import DEFAULT_GPU_REGIONS, AwsProvider
from launcher.providers.gcp import GcpProvider


@pytest.fixture
def bare_env(tmp_path, monkeypatch):
    """No cloud credentials anywhere: empty HOME, no AWS_/GOOGLE_ variables."""
    import os

    for var in list(os.environ):
        if var.startswith(("AWS_", "GOOGLE_", "CLOUDSDK_", "GCLOUD_", "LAUNCHER_GCP", "LAUNCHER_AWS")):
            monkeypatch.delenv(var)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def test_aws_env_credentials_and_endpoint(bare_env, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5000")
    st = AwsProvider().credentials()
    assert st.enabled and "AWS_ACCESS_KEY_ID" in st.source and "http://127.0.0.1:5000" in st.source


def test_aws_shared_file_profile(bare_env, monkeypatch):
    (bare_env / ".aws").mkdir()
    (bare_env / ".aws" / "credentials").write_text("[research]\naws_access_key_id = A\naws_secret_access_key = B\n")
    monkeypatch.setenv("AWS_PROFILE", "research")
    st = AwsProvider().credentials()
    assert st.enabled and "credentials" in st.source and "research" in st.source


def test_aws_nothing_found(bare_env):
    st = AwsProvider().credentials()
    assert not st.enabled and "no credentials" in st.source


def test_aws_verify_asks_sts_whose_they_are(aws_env, aws_account):
    st = AwsProvider().credentials(verify=True)
    assert st.enabled and st.account == aws_account  # the account this test assumed a role in
    assert "environment variables" in st.source and aws_env in st.source


def test_aws_regions_default_env_and_all(aws_env, monkeypatch):
    assert AwsProvider().regions() == list(DEFAULT_GPU_REGIONS)
    monkeypatch.setenv("LAUNCHER_AWS_REGIONS", "us-west-2, eu-west-1")
    assert AwsProvider().regions() == ["us-west-2", "eu-west-1"]
    monkeypatch.setenv("LAUNCHER_AWS_REGIONS", "all")
    every = AwsProvider().regions()  # EC2 DescribeRegions on moto
    assert {"us-east-1", "ap-southeast-2", "sa-east-1"} <= set(every) and len(every) > len(DEFAULT_GPU_REGIONS)


def test_gcp_application_credentials_file_and_project_from_it(bare_env, monkeypatch, tmp_path):
    key = tmp_path / "sa.json"
    key.write_text(json.dumps({"type": "service_account", "project_id": "ml-prod"}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    st = GcpProvider().credentials()
    assert st.enabled and str(key) in st.source and st.account == "ml-prod"


def test_gcp_adc_with_project_from_gcloud_config(bare_env):
    gcloud = bare_env / ".config" / "gcloud"
    (gcloud / "configurations").mkdir(parents=True)
    (gcloud / "application_default_credentials.json").write_text(json.dumps({"type": "authorized_user"}))
    (gcloud / "active_config").write_text("work\n")
    (gcloud / "configurations" / "config_work").write_text("[core]\nproject = team-gpus\n")
    st = GcpProvider().credentials()
    assert st.enabled and "application_default_credentials.json" in st.source and st.account == "team-gpus"


def test_gcp_credentials_without_project_are_not_enough(bare_env):
    gcloud = bare_env / ".config" / "gcloud"
    gcloud.mkdir(parents=True)
    (gcloud / "application_default_credentials.json").write_text(json.dumps({"type": "authorized_user"}))
    st = GcpProvider().credentials()
    assert not st.enabled and "no project" in st.source


def test_gcp_nothing_found(bare_env):
    st = GcpProvider().credentials()
    assert not st.enabled and "no credentials" in st.source


def test_gcp_local_endpoint_is_anonymous(bare_env):
    st = GcpProvider("p", api_endpoint="http://127.0.0.1:9").credentials()
    assert st.enabled and "anonymous" in st.source and "http://127.0.0.1:9" in st.source


# ---- billing account (recorded with each attempt for the FOCUS export) ----------------------


def test_aws_billing_account_is_the_sts_callers_account(aws_env, aws_account, tmp_path):
    from launcher.controller.billing_account import with_billing_account
    from launcher.ledger import Ledger, NewAttempt, RunRecord

    ref = AwsProvider().billing_account()  # STS GetCallerIdentity on the real moto_server
    assert ref is not None and ref.id == aws_account and aws_account in ref.name
    new = with_billing_account(NewAttempt(cloud="aws", region="us-east-1", instance_type="g5.xlarge", price_usd_per_hour=1.0), AwsProvider())
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:  # recorded with the attempt, read back from the ledger
        led.create_run(RunRecord(run_id="r1", name="r1", spec_hash="0" * 64, spec_yaml="run: x", project="p"))
        a = led.add_attempt("r1", new)
        got = led.get_attempt(a.attempt_id)
    assert (got.billing_account_id, got.billing_account_name) == (aws_account, f"AWS account {aws_account}")


def test_aws_billing_account_unknown_without_credentials(bare_env, monkeypatch):
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-role probe
    assert AwsProvider().billing_account() is None  # never an error: it only labels charges


def test_gcp_billing_account_is_the_project(bare_env):
    assert GcpProvider(project="research-123", env={}).billing_account().id == "research-123"
    ref = GcpProvider(env={"GOOGLE_CLOUD_PROJECT": "from-env", "HOME": str(bare_env)}).billing_account()
    assert ref is not None and (ref.id, ref.name) == ("from-env", "GCP project from-env")
    creds = bare_env / "sa.json"
    creds.write_text(json.dumps({"type": "service_account", "project_id": "from-creds"}))
    ref = GcpProvider(env={"GOOGLE_APPLICATION_CREDENTIALS": str(creds), "HOME": str(bare_env)}).billing_account()
    assert ref is not None and ref.id == "from-creds"
    assert GcpProvider(env={"HOME": str(bare_env)}).billing_account() is None


def test_local_provider_records_no_account():
    from launcher.controller.billing_account import with_billing_account
    from launcher.ledger import NewAttempt
    from launcher.providers.local import LocalProvider

    new = NewAttempt(cloud="local", region="local", instance_type="local", price_usd_per_hour=0.0)
    assert with_billing_account(new, LocalProvider()) == new  # the report derives a stable local id
