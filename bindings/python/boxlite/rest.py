"""A runtime on a server of BoxLite's REST API (``boxlite serve``), as
BoxLite's SDK opens one::

    rt = boxlite.Boxlite.rest(boxlite.BoxliteRestOptions(
        url="https://boxes.example.com", credential=boxlite.ApiKeyCredential(key)))
    rt = boxlite.Boxlite.rest(boxlite.BoxliteRestOptions.from_env())

Boxes, SimpleBox, CodeBox and InteractiveBox work on it as on a local
runtime. What names this machine's files for the server is refused with
``UnsupportedError``: ``images.load``, ``import_box``,
volumes and published ports."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional

from ._checks import check_output_limit, check_str
from .errors import InvalidArgumentError, UnsupportedError

__all__ = ["ApiKeyCredential", "BoxliteRestOptions"]


class ApiKeyCredential:
    """An API key (``boxlite serve key create``), sent as
    ``Authorization: Bearer``. Its repr never shows the key."""

    __slots__ = ("_key",)

    def __init__(self, key: str):
        key = check_str(key, "ApiKeyCredential.key")
        if not key:
            raise InvalidArgumentError("ApiKeyCredential: the key is empty")
        self._key = key

    @staticmethod
    def from_env() -> "ApiKeyCredential":
        """The key in $BOXLITE_API_KEY."""
        key = os.environ.get("BOXLITE_API_KEY")
        if not key:
            raise InvalidArgumentError("BOXLITE_API_KEY is not set")
        return ApiKeyCredential(key)

    def get_token(self) -> str:
        """The bearer token: the key itself."""
        return self._key

    def __repr__(self) -> str:
        return "ApiKeyCredential(<hidden>)"


class BoxliteRestOptions:
    """Where the server is and how to authenticate. ``url`` is http or
    https (plain http only to a loopback host unless ``insecure_http``);
    ``credential`` is required by ``boxlite serve``. ``path_prefix`` (BoxLite
    cloud's routing slot) is not used by ``boxlite serve``: giving one is an
    ``UnsupportedError``. ``output_limit_bytes`` is as ``Options``'."""

    def __init__(self, url: str, credential: Optional[ApiKeyCredential] = None, path_prefix: Optional[str] = None,
                 *, output_limit_bytes: Optional[int] = None, insecure_http: bool = False):
        self.url = check_str(url, "BoxliteRestOptions.url")
        if credential is not None and not isinstance(credential, ApiKeyCredential):
            raise TypeError(f"credential must be boxlite.ApiKeyCredential, not {type(credential).__name__}")
        self.credential = credential
        self.path_prefix = path_prefix
        self.output_limit_bytes = output_limit_bytes
        if not isinstance(insecure_http, bool):
            raise TypeError(f"insecure_http must be bool, not {type(insecure_http).__name__}")
        self.insecure_http = insecure_http

    @staticmethod
    def from_env() -> "BoxliteRestOptions":
        """From $BOXLITE_REST_URL (required), $BOXLITE_API_KEY and
        $BOXLITE_REST_PATH_PREFIX, as BoxLite's SDK reads them."""
        url = os.environ.get("BOXLITE_REST_URL")
        if not url:
            raise InvalidArgumentError("BOXLITE_REST_URL is not set")
        key = os.environ.get("BOXLITE_API_KEY")
        return BoxliteRestOptions(url, ApiKeyCredential(key) if key else None,
                                  os.environ.get("BOXLITE_REST_PATH_PREFIX") or None)

    def to_json(self) -> str:
        if self.path_prefix:
            raise UnsupportedError("BoxliteRestOptions.path_prefix: boxlite serve has no routing slot")
        if self.credential is None:
            raise InvalidArgumentError("BoxliteRestOptions: a credential is required (ApiKeyCredential)")
        o: Dict[str, Any] = {"url": self.url, "api_key": self.credential.get_token()}
        limit = check_output_limit(self.output_limit_bytes, "BoxliteRestOptions.output_limit_bytes")
        if limit is not None:
            o["output_limit_bytes"] = limit
        if self.insecure_http:
            o["insecure_http"] = True
        return json.dumps(o)

    def __repr__(self) -> str:
        return f"BoxliteRestOptions(url={self.url!r}, credential={self.credential!r})"
