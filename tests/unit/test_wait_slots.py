"""The console's long-poll caps: per credential, per client address and in all."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from vq.web.errors import ApiError
from vq.web.waits import WaitSlots


def _refused(slots: WaitSlots, token: str, peer: str) -> ApiError:
    with pytest.raises(ApiError) as refused, slots.hold(token, peer):
        pass
    error = refused.value
    assert error.status == 503 and error.headers["Retry-After"] == "5"
    assert error.code == "too-many-waits"
    return error


def test_one_address_cannot_take_every_slot_with_many_credentials() -> None:
    slots = WaitSlots(per_token=10, per_peer=3, total=100)
    with ExitStack() as held:
        for n in range(3):
            held.enter_context(slots.hold(f"token-{n}", "10.0.0.1"))
        assert "from this address" in _refused(slots, "token-9", "10.0.0.1").message
        held.enter_context(slots.hold("token-9", "10.0.0.2"))  # another address is served
    with slots.hold("token-0", "10.0.0.1"):  # released on exit: admitted again
        pass


def test_one_credential_is_capped_across_addresses() -> None:
    slots = WaitSlots(per_token=2, per_peer=10, total=100)
    with slots.hold("anonymous", "a"), slots.hold("anonymous", "b"):
        assert "with these credentials" in _refused(slots, "anonymous", "c").message


def test_the_total_cap_holds_for_everyone_together() -> None:
    slots = WaitSlots(per_token=10, per_peer=10, total=2)
    with slots.hold("t1", "a"), slots.hold("t2", "b"):
        assert "in progress on this console" in _refused(slots, "t3", "c").message


def test_a_refused_wait_takes_no_slot() -> None:
    slots = WaitSlots(per_token=1, per_peer=10, total=10)
    with slots.hold("t", "a"):
        for _ in range(5):
            _refused(slots, "t", "a")
    with slots.hold("t", "a"):  # the refusals left nothing behind
        pass
