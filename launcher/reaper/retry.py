"""Retry with exponential backoff and jitter for provider calls (throttling, transient errors)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def with_retries(
    fn: Callable[[], T],
    *,
    attempts: int = 4,
    base_delay_s: float = 0.5,
    max_delay_s: float = 8.0,
    sleep: Callable[[float], None] = time.sleep,
    retry_on: tuple[type[BaseException], ...] = (Exception,),
    no_retry_on: tuple[type[BaseException], ...] = (NotImplementedError,),
) -> T:
    for i in range(attempts):
        try:
            return fn()
        except no_retry_on:
            raise
        except retry_on:
            if i == attempts - 1:
                raise
            delay = min(max_delay_s, base_delay_s * (2**i))
            sleep(delay * (0.5 + random.random() / 2))
    raise AssertionError("unreachable")
