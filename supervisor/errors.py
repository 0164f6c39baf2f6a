"""The supervisor's errors. One root; a refusal always carries its own sentence.

::

    SupervisorError
    ├── Refusal                      the supervisor will not do this; ``str()`` says why and the fix
    │   ├── GateClosed               off by default, CI, remote transport, block-list, consent
    │   ├── NestedRunRefused         asup started inside a child of asup
    │   ├── RepositoryRefused        not a git repository, no commits yet, bare repository
    │   └── SandboxUnavailable       the launcher is missing or user namespaces are denied
    ├── ConfigError                  a config or profile file is unreadable or invalid
    ├── StoreError                   the run store cannot be used (e.g. a newer schema)
    └── AgentProtocolError           the vendor broke its stream contract

Errors of dependencies are mapped where they enter (``raise Mapped(msg) from exc``).
"""

from __future__ import annotations

__all__ = [
    "AgentProtocolError",
    "ConfigError",
    "GateClosed",
    "NestedRunRefused",
    "Refusal",
    "RepositoryRefused",
    "SandboxUnavailable",
    "StoreError",
    "SupervisorError",
]


class SupervisorError(Exception):
    """Root of every error the supervisor raises on purpose."""


class Refusal(SupervisorError):
    """The supervisor refuses to act. The message is one sentence naming the cause and the fix;
    ``code`` is a stable machine-readable name for scripts and tests."""

    code: str = "refused"

    def __init__(self, sentence: str, *, code: str | None = None) -> None:
        super().__init__(sentence)
        if code is not None:
            self.code = code

    @property
    def sentence(self) -> str:
        return str(self)


class GateClosed(Refusal):
    code = "gate_closed"


class NestedRunRefused(Refusal):
    code = "nested_run"


class RepositoryRefused(Refusal):
    code = "repository"


class SandboxUnavailable(Refusal):
    code = "sandbox_unavailable"


class ConfigError(SupervisorError):
    pass


class StoreError(SupervisorError):
    pass


class AgentProtocolError(SupervisorError):
    pass
