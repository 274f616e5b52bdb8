"""BoxLite 0.10's ImageRegistry: how the runtime's pulls reach a registry."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ._checks import check_str

__all__ = ["ImageRegistry"]


@dataclass(eq=False)
class ImageRegistry:
    """``Options(image_registries=[ImageRegistry(host, ...)])``: ``transport``
    ``"https"`` (default) or ``"http"`` (plain, for a registry on loopback);
    ``skip_verify`` accepts any TLS certificate; ``username``/``password`` or
    ``bearer_token`` are sent to ``host`` only; ``search`` puts the registry
    in the list unqualified names (``"alpine"``) are looked up in, in order,
    instead of docker.io; ``mirrors`` (this SDK's) are URLs tried first. The
    credentials are never printed (``repr`` leaves them out) nor in info."""

    host: str
    transport: str = "https"
    skip_verify: bool = False
    search: bool = False
    username: Optional[str] = None
    password: Optional[str] = field(default=None, repr=False)
    bearer_token: Optional[str] = field(default=None, repr=False)
    mirrors: List[str] = field(default_factory=list)

    def __repr__(self) -> str:
        auth = "bearer token" if self.bearer_token else (f"user {self.username}" if self.username else "none")
        return (f'ImageRegistry(host="{self.host}", transport="{self.transport}", skip_verify={self.skip_verify}, '
                f"search={self.search}, auth={auth})")

    __str__ = __repr__

    def to_wire(self, what: str) -> Dict[str, Any]:
        o: Dict[str, Any] = {"host": check_str(self.host, f"{what}.host")}
        if self.transport != "https":
            o["transport"] = check_str(self.transport, f"{what}.transport")
        for key in ("skip_verify", "search"):
            v = getattr(self, key)
            if not isinstance(v, bool):
                raise TypeError(f"{what}.{key} must be bool, not {type(v).__name__}")
            if v:
                o[key] = True
        for key in ("username", "password", "bearer_token"):
            v = getattr(self, key)
            if v is not None:
                o[key] = check_str(v, f"{what}.{key}")
        if isinstance(self.mirrors, (str, bytes)) or not isinstance(self.mirrors, (list, tuple)):
            raise TypeError(f"{what}.mirrors must be a list of str, not {type(self.mirrors).__name__}")
        if self.mirrors:
            o["mirrors"] = [check_str(m, f"{what}.mirrors[{i}]") for i, m in enumerate(self.mirrors)]
        return o


def registries_json(regs: Any, what: str) -> List[Dict[str, Any]]:
    """Options.image_registries as the C ABI's JSON: ImageRegistry objects,
    or a host alone for a search registry."""
    if isinstance(regs, (str, bytes)) or not isinstance(regs, (list, tuple)):
        raise TypeError(f"{what} must be a list of boxlite.ImageRegistry, not {type(regs).__name__}")
    out = []
    for i, r in enumerate(regs):
        if isinstance(r, str):  # a host alone: a search registry, as BoxLite's earlier list of names
            r = ImageRegistry(r, search=True)
        if not isinstance(r, ImageRegistry):
            raise TypeError(f"{what}[{i}] must be boxlite.ImageRegistry, not {type(r).__name__}")
        out.append(r.to_wire(f"{what}[{i}]"))
    return out
