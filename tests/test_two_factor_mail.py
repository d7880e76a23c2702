"""The e-mails a second factor sends by real SMTP: a recovery code used, TOTP turned off."""

from __future__ import annotations

import pytest

from .conftest import make_config
from .test_email_notify import _mails
from .test_sessions import smtp  # noqa: F401 - the aiosmtpd fixture
from .test_two_factor import code_of, enrol, password_step, second_step


@pytest.fixture
def config(tmp_path, database_url, smtp):
    return make_config(
        tmp_path,
        database__url=database_url,
        mail__smtp_host="127.0.0.1",
        mail__smtp_port=smtp.port,
        mail__starttls=False,
    )


async def test_a_recovery_code_used_is_mailed_without_the_code(client, smtp, alice):
    secret, codes = await enrol(client, alice)
    assert await _mails(smtp, 1, timeout=0.5) == []  # turning it on mails nothing
    # A TOTP sign-in is the ordinary way in: no e-mail.
    challenge = (await password_step(client, alice))["challenge"]
    assert (await second_step(client, challenge, code_of(secret))).status == 200
    assert await _mails(smtp, 1, timeout=0.5) == []
    challenge = (await password_step(client, alice))["challenge"]
    assert (await second_step(client, challenge, codes[2])).status == 200
    [mail] = await _mails(smtp, 1)
    assert mail["To"] == "alice@example.com"
    assert mail["Subject"] == "[hubsvc] a recovery code was used"
    text = mail.get_content()
    assert "recovery codes was used to sign in" in text
    assert codes[2] not in text and secret not in text
    # A refused recovery code (used already) mails nothing more.
    challenge = (await password_step(client, alice))["challenge"]
    assert (await second_step(client, challenge, codes[2])).status == 401
    assert len(await _mails(smtp, 2, timeout=0.5)) == 1


async def test_turning_totp_off_is_mailed_once_and_a_refusal_is_not(client, smtp, alice):
    secret, codes = await enrol(client, alice)
    url = "/api/users/me/2fa/totp"
    resp = await client.delete(
        url, json={"currentPassword": alice.password, "code": "000000"}, headers=alice.headers
    )
    assert resp.status == 403
    assert await _mails(smtp, 1, timeout=0.5) == []
    resp = await client.delete(
        url,
        json={"currentPassword": alice.password, "code": code_of(secret)},
        headers=alice.headers,
    )
    assert resp.status == 204
    [mail] = await _mails(smtp, 1)
    assert mail["To"] == "alice@example.com"
    assert mail["Subject"] == "[hubsvc] two-factor authentication was turned off"
    assert "authenticator app (TOTP) was removed" in mail.get_content()
    assert secret not in mail.get_content()
