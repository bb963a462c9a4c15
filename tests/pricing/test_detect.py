"""Credential detection reads env and files only (injected env/home), never the SDKs."""

from launcher.providers.detect import enabled_clouds


def test_nothing_found(tmp_path):
    st = enabled_clouds(env={}, home=tmp_path)
    assert {k: v.enabled for k, v in st.items()} == {
        "aws": False, "gcp": False, "azure": False, "lambda": False, "runpod": False, "local": True,
    }  # fmt: skip
    assert "no credentials" in st["aws"].source


def test_env_keys_and_endpoint(tmp_path):
    st = enabled_clouds(
        env={"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b", "AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
             "LAMBDA_API_KEY": "x", "RUNPOD_API_KEY": "y"},
        home=tmp_path,
    )  # fmt: skip
    assert st["aws"].enabled and "127.0.0.1:5000" in st["aws"].source
    assert st["lambda"].enabled and st["runpod"].enabled
    # endpoint without keys is not enough
    assert not enabled_clouds(env={"AWS_ENDPOINT_URL": "http://x"}, home=tmp_path)["aws"].enabled


def test_aws_files_and_profiles(tmp_path):
    aws = tmp_path / ".aws"
    aws.mkdir()
    (aws / "credentials").write_text("[default]\naws_access_key_id = A\naws_secret_access_key = B\n")
    assert enabled_clouds(env={}, home=tmp_path)["aws"].source.endswith("[default]")
    assert not enabled_clouds(env={"AWS_PROFILE": "other"}, home=tmp_path)["aws"].enabled
    (aws / "config").write_text("[profile other]\nsso_session = corp\n")
    st = enabled_clouds(env={"AWS_PROFILE": "other"}, home=tmp_path)["aws"]
    assert st.enabled and "sso_session" in st.source
    (aws / "credentials").write_text("garbage without sections")
    assert enabled_clouds(env={}, home=tmp_path)["aws"].enabled is False


def test_gcp_adc_and_env(tmp_path):
    key = tmp_path / "sa.json"
    assert not enabled_clouds(env={"GOOGLE_APPLICATION_CREDENTIALS": str(key)}, home=tmp_path)["gcp"].enabled
    key.write_text("{}")
    assert enabled_clouds(env={"GOOGLE_APPLICATION_CREDENTIALS": str(key)}, home=tmp_path)["gcp"].enabled
    adc = tmp_path / ".config" / "gcloud" / "application_default_credentials.json"
    adc.parent.mkdir(parents=True)
    adc.write_text("{}")
    assert enabled_clouds(env={}, home=tmp_path)["gcp"].source == str(adc)


def test_key_files(tmp_path):
    (tmp_path / ".lambda_cloud").mkdir()
    (tmp_path / ".lambda_cloud" / "lambda_keys").write_text("api_key = secret\n")
    (tmp_path / ".runpod").mkdir()
    (tmp_path / ".runpod" / "config.toml").write_text('[default]\napi_key = "x"\n')
    (tmp_path / ".azure").mkdir()
    (tmp_path / ".azure" / "msal_token_cache.json").write_text("{}")
    st = enabled_clouds(env={}, home=tmp_path)
    assert st["lambda"].enabled and st["runpod"].enabled and st["azure"].enabled
