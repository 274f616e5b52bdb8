"""Secrets that never enter the box (BoxLite's ``Secret``)."""

from dataclasses import dataclass, field
import re
from typing import Any, Dict, List, Optional

from ._checks import check_str


@dataclass(eq=False)
class Secret:
    """A credential the box uses without holding it. The box sees only the
    placeholder (``get_placeholder()``, default ``<BOXLITE_SECRET:NAME>``, and
    in its environment as ``BOXLITE_SECRET_<NAME>``); the host's network
    stack puts ``value`` in its place in HTTPS requests to ``hosts`` (names
    or ``*.wildcards``, optionally ``:port``, default 443), in the request
    line, headers and body. Each host is reachable on that port even when
    ``allow_net`` does not list it. See docs/secrets.md."""

    name: str
    value: str = field(repr=False)  # never printed
    hosts: List[str] = field(default_factory=list)
    placeholder: Optional[str] = None

    def get_placeholder(self) -> str:
        """What the box sees in the value's place."""
        return self.placeholder or f"<BOXLITE_SECRET:{self.name}>"

    def __repr__(self) -> str:  # BoxLite's, the value never shown
        hosts = ", ".join(_quote(h) for h in self.hosts)
        return (f"Secret(name={_quote(self.name)}, hosts=[{hosts}], "
                f"placeholder={_quote(self.get_placeholder())}, value=[REDACTED])")

    __str__ = __repr__

    def env_key(self) -> str:
        """The environment variable the box finds the placeholder in."""
        return "BOXLITE_SECRET_" + re.sub(r"[^A-Za-z0-9_]", "_", self.name).upper()

    def to_wire(self, what: str) -> Dict[str, Any]:
        if isinstance(self.hosts, (str, bytes)) or not isinstance(self.hosts, (list, tuple)):
            raise TypeError(f"{what}.hosts must be a list of str, not {type(self.hosts).__name__}")
        o: Dict[str, Any] = {"name": check_str(self.name, f"{what}.name"), "value": check_str(self.value, f"{what}.value"),
                             "hosts": [check_str(h, f"{what}.hosts[{i}]") for i, h in enumerate(self.hosts)]}
        if self.placeholder is not None:
            o["placeholder"] = check_str(self.placeholder, f"{what}.placeholder")
        return o


def _quote(v: Any) -> str:
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class SecretInfo:
    """A box's secret as ``BoxInfo.secrets`` shows it: its name, hosts and
    placeholder, never its value (the box's record holds none)."""

    name: str
    hosts: List[str]
    placeholder: str

    def get_placeholder(self) -> str:
        return self.placeholder

    @classmethod
    def from_json(cls, o: Dict[str, Any]) -> "SecretInfo":
        return cls(name=o.get("name", ""), hosts=list(o.get("hosts") or []), placeholder=o.get("placeholder", ""))


def secrets_json(secrets: Any, what: str) -> List[Dict[str, Any]]:
    """BoxOptions.secrets: Secret objects, or dicts with Secret's fields."""
    if secrets is None:
        return []
    if isinstance(secrets, (str, bytes, dict)) or not isinstance(secrets, (list, tuple)):
        raise TypeError(f"{what} must be a list of boxlite.Secret, not {type(secrets).__name__}")
    out = []
    for i, s in enumerate(secrets):
        w = f"{what}[{i}]"
        if isinstance(s, dict):
            unknown = sorted(set(s) - {"name", "value", "hosts", "placeholder"})
            if unknown:
                raise TypeError(f"{w} has an unknown key {unknown[0]!r} (name, value, hosts, placeholder)")
            s = Secret(**s)
        if not isinstance(s, Secret):
            raise TypeError(f"{w} must be a boxlite.Secret, not {type(s).__name__}")
        out.append(s.to_wire(w))
    return out
