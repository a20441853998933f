"""Password guessing on the sign-in pages: after LOGIN_FAILURE_RATE failures from one address, or
for one username from anywhere, sign-in is refused with a 429 and Retry-After, even with the
right password, while other people sign in as usual."""

from __future__ import annotations

import random
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import override_settings

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("_three_failures")]

PASSWORD = "correct horse battery staple"


@pytest.fixture
def _three_failures():  # type: ignore[no-untyped-def]
    with override_settings(LOGIN_FAILURE_RATE="3/min"):
        yield


def fresh_address() -> str:
    return f"198.19.{random.randrange(256)}.{random.randrange(1, 255)}"


def make_user(*, staff: bool = False) -> str:
    username = f"user-{uuid.uuid4().hex[:8]}"
    get_user_model().objects.create_user(username, password=PASSWORD, is_staff=staff)
    return username


def sign_in(username: str, password: str, address: str, path: str = "/accounts/login/"):  # type: ignore[no-untyped-def]
    return Client(REMOTE_ADDR=address).post(path, {"username": username, "password": password})


def test_an_address_that_keeps_failing_is_refused_even_with_the_right_password() -> None:
    victim, attacker = make_user(), fresh_address()
    for i in range(3):
        wrong = sign_in(victim if i % 2 else make_user(), "guess", attacker)
        assert wrong.status_code == 200 and not wrong.wsgi_request.user.is_authenticated  # the form again
    refused = sign_in(victim, PASSWORD, attacker)
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0 and "Too many failed sign-ins" in refused.content.decode()
    assert sign_in(make_user(), PASSWORD, fresh_address()).status_code == 302  # everyone else signs in


def test_a_username_guessed_from_many_addresses_is_locked_for_the_window() -> None:
    victim = make_user()
    for _ in range(3):
        assert sign_in(victim, "guess", fresh_address()).status_code == 200
    assert sign_in(victim, PASSWORD, fresh_address()).status_code == 429
    assert sign_in(victim.upper(), PASSWORD, fresh_address()).status_code == 429  # same user, other case


def test_the_admin_sign_in_page_is_throttled_too() -> None:
    admin, attacker = make_user(staff=True), fresh_address()
    for _ in range(3):
        assert sign_in(admin, "guess", attacker, "/admin/login/").status_code == 200
    assert sign_in(admin, PASSWORD, attacker, "/admin/login/").status_code == 429
    assert sign_in(make_user(staff=True), PASSWORD, fresh_address(), "/admin/login/").status_code == 302
