"""The limits of every request to a registry's HTTP API: how long it may take and what is tried
again (imported by image_index.Registry when it talks to a registry, as oras-py is).

A registry out of reach is reported in about a second, one that accepts a connection and never
answers after READ_TIMEOUT_S, and a gateway's passing 502/503/504 is asked again twice: urllib3's
Retry does the retrying, as requests' own adapters do.
"""

from __future__ import annotations

from requests import PreparedRequest, Response
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

CONNECT_TIMEOUT_S = 10
# a manifest, a bill of materials or a signature: small documents, never an image's layers
READ_TIMEOUT_S = 60
RETRIES = Retry(
    total=2,
    connect=2,
    read=0,  # a request the registry may have carried out is not sent twice
    status=2,
    status_forcelist=(502, 503, 504),
    allowed_methods=None,  # every method: the API's PUTs are idempotent, an upload's POST starts one
    backoff_factor=0.5,
    raise_on_status=False,  # the last answer is the caller's to report
)


class BoundedAdapter(HTTPAdapter):
    """An HTTP adapter whose requests time out (requests has no default) and are retried as
    RETRIES says."""

    def __init__(self) -> None:
        super().__init__(max_retries=RETRIES)

    def send(
        self,
        request: PreparedRequest,
        stream: bool = False,
        timeout: float | tuple[float | None, float | None] | None = None,
        verify: bool | str = True,
        cert: str | tuple[str, str] | None = None,
        proxies: dict[str, str] | None = None,
    ) -> Response:
        bounded = (CONNECT_TIMEOUT_S, READ_TIMEOUT_S) if timeout is None else timeout
        return super().send(request, stream, bounded, verify, cert, proxies)
