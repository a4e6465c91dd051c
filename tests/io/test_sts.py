"""StsVendor: the AssumeRole request it sends (role, session name, the table's session policy, duration,
external id), what it makes of STS's answer, how it classifies STS's failures, and that its settings
refuse what STS would."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from paimon_meta.errors import CredentialVendingError, ValidationError
from paimon_meta.io.sts import StsSettings, StsVendor, _RedactStsSecrets, session_name, vendable

ROLE = "arn:aws:iam::123456789012:role/vend"
OPTIONS = {
    "s3.endpoint": "http://127.0.0.1:9000",
    "s3.access-key": "server-key",
    "s3.secret-key": "server-secret",
    "s3.region": "eu-west-1",
    "s3.path-style-access": "true",
}


class _Sts:
    def __init__(self, fail: Exception | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.fail = fail

    def assume_role(self, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        if self.fail is not None:
            raise self.fail
        return {
            "Credentials": {
                "AccessKeyId": "ASIAVENDED",
                "SecretAccessKey": "vended-secret",
                "SessionToken": "vended-session",
                "Expiration": datetime.now(UTC) + timedelta(seconds=request["DurationSeconds"]),
            }
        }

    def close(self) -> None:
        pass


def _vendor(settings: StsSettings, sts: _Sts) -> StsVendor:
    vendor = StsVendor(settings, OPTIONS)
    vendor._client = sts  # type: ignore[assignment]
    return vendor


def _statements(request: dict[str, Any]) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = json.loads(request["Policy"])["Statement"]
    return statements


def test_the_request_carries_the_tables_policy_and_settings() -> None:
    sts = _Sts()
    settings = StsSettings(role_arn=ROLE, duration_seconds=7200, external_id="ext-42")
    creds = _vendor(settings, sts).vend("s3://wh/warehouse/db.db/t1", "read", "alice@example.com")
    [request] = sts.requests
    assert request["RoleArn"] == ROLE
    assert request["RoleSessionName"] == "pm-read-alice@example.com"
    assert request["DurationSeconds"] == 7200
    assert request["ExternalId"] == "ext-42"
    actions = {
        a
        for s in _statements(request)
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert actions == {"s3:GetObject", "s3:ListBucket"}
    assert "warehouse/db.db/t1" in request["Policy"]
    # The client's map: the server's connection options (never its own keys), then the vended keys.
    assert creds.options() == {
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.region": "eu-west-1",
        "s3.path-style-access": "true",
        "s3.access-key": "ASIAVENDED",
        "s3.secret-key": "vended-secret",
        "s3.session-token": "vended-session",
    }
    assert "vended-secret" not in repr(creds) and "vended-session" not in repr(creds)
    assert 7190 < creds.remaining_seconds() <= 7200


def test_pyarrow_create_dir_widens_only_write_credentials() -> None:
    def unconditioned_list(request: dict[str, Any]) -> bool:
        return any(
            s.get("Action") in ("s3:ListBucket", ["s3:ListBucket"]) and "Condition" not in s
            for s in _statements(request)
        )

    for compat in (False, True):
        sts = _Sts()
        vendor = _vendor(StsSettings(role_arn=ROLE, pyarrow_create_dir=compat), sts)
        vendor.vend("s3://wh/warehouse/db.db/t1", "write", "etl")
        vendor.vend("s3://wh/warehouse/db.db/t1", "read", "etl")
        write, read = sts.requests
        assert unconditioned_list(write) is compat
        assert not unconditioned_list(read)


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (ClientError({"Error": {"Code": "Throttling", "Message": "slow"}}, "AssumeRole"), True),
        (
            ClientError(
                {"Error": {"Code": "InternalFailure"}, "ResponseMetadata": {"HTTPStatusCode": 500}},  # type: ignore[typeddict-item]
                "AssumeRole",
            ),
            True,
        ),
        (EndpointConnectionError(endpoint_url="http://sts"), True),
        (ClientError({"Error": {"Code": "AccessDenied", "Message": "not trusted"}}, "AssumeRole"), False),
        (ClientError({"Error": {"Code": "ValidationError", "Message": "duration"}}, "AssumeRole"), False),
    ],
)
def test_failures_are_transient_or_refusals(error: Exception, transient: bool) -> None:
    vendor = _vendor(StsSettings(role_arn=ROLE), _Sts(fail=error))
    with pytest.raises(CredentialVendingError) as raised:
        vendor.vend("s3://wh/warehouse/db.db/t1", "write", "etl")
    assert raised.value.transient is transient
    assert ROLE in raised.value.message


@pytest.mark.parametrize(
    ("fields", "option"),
    [
        ({"role_arn": "vend"}, "sts-role-arn"),
        ({"duration_seconds": 600}, "sts-duration"),
        ({"duration_seconds": 13 * 3600}, "sts-duration"),
        ({"external_id": "x"}, "sts-external-id"),
    ],
)
def test_settings_refuse_what_sts_would(fields: dict[str, Any], option: str) -> None:
    with pytest.raises(ValidationError) as raised:
        StsSettings(**{"role_arn": ROLE, **fields})
    assert raised.value.fields["option"] == option


def test_session_names_fit_sts_rules() -> None:
    name = session_name("a user/with spaces:and*more" + "x" * 80, "write")
    assert len(name) <= 64 and name.startswith("pm-write-a_user_with_spaces_and_more")


def test_botocore_debug_records_of_sts_answers_are_redacted() -> None:
    body = (
        b"<Credentials><AccessKeyId>ASIAX</AccessKeyId><SecretAccessKey>s3cr3t</SecretAccessKey>"
        b"<SessionToken>t0k3n</SessionToken><Expiration>2026</Expiration></Credentials>"
    )
    record = logging.LogRecord("botocore.parsers", logging.DEBUG, "", 0, "Response body:\n%r", (body,), None)
    assert _RedactStsSecrets().filter(record)
    shown = record.getMessage()
    assert "s3cr3t" not in shown and "t0k3n" not in shown and "ASIAX" not in shown
    assert "<Expiration>2026</Expiration>" in shown


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("s3://wh/warehouse", True),
        ("S3A://wh/warehouse", True),
        ("/tmp/warehouse", False),
        ("file:///tmp/warehouse", False),
        ("gs://wh/warehouse", False),
        ("relative/path", False),
        ("", False),
    ],
)
def test_only_s3_locations_are_vendable(location: str, expected: bool) -> None:
    assert vendable(location) is expected


def test_sts_calls_have_their_own_short_bounds() -> None:
    """A vend holds its key's lock with requests waiting: a hanging STS must not hold them for the
    storage options' 30 s reads times the attempts."""
    vendor = StsVendor(StsSettings(role_arn=ROLE), {**OPTIONS, "s3.read-timeout": "60 s"})
    config: Any = vendor._sts().meta.config  # botocore's Config: its options are not in the stubs
    assert (config.connect_timeout, config.read_timeout) == (2.0, 5.0)
    assert config.retries["total_max_attempts"] == 3
    vendor.close()
