"""The reaper's retries (tenacity): only errors a provider marks transient (TransientProviderError),
with exponential backoff and jitter, bounded. Cloud SDK calls are retried by the SDKs themselves
(botocore's retry modes, google-api-core's Retry, configured in each provider); their final errors
are not retried again here, which would multiply the calls (8 botocore attempts x 4 = 32)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import tenacity

from launcher.errors import TransientProviderError

T = TypeVar("T")


def with_retries(
    fn: Callable[[], T],
    *,
    attempts: int = 4,
    base_delay_s: float = 0.5,
    max_delay_s: float = 8.0,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(TransientProviderError),
        stop=tenacity.stop_after_attempt(attempts),
        wait=tenacity.wait_exponential_jitter(initial=base_delay_s, max=max_delay_s, jitter=base_delay_s),
        sleep=sleep,
        reraise=True,  # the provider's own error, not tenacity's RetryError
    )
    return retrying(fn)
