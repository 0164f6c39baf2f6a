"""Who answers a permission the policy puts to the person: the approver.

The policy (:mod:`supervisor.policy`) decides allow / ask / deny; an *ask* goes to an
:class:`Approver` when the run has a live one, and becomes a deny when it has none (``asup run
--unattended``, no terminal, a library caller that passes none). The supervisor never answers
an ask itself, and never lets the agent answer it.

An approver sees one :class:`ApprovalRequest` at a time (the ACP client serialises them): the
action as the policy judged it, the policy's reason, and the agent's own options for an ACP
``session/request_permission`` (none for an ``fs/*`` request, which is a plain yes / no). Its
answer is the option the person picked (its kind: an "allow always" is still only this one
action, see :func:`supervisor.policy.resolve_ask`), a plain ``True`` / ``False``, or ``None`` for
no answer (a deny).

The terminal approver is the CLI's (``supervisor.cli.approve``); tests pass scripted ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from supervisor.policy import Action, PermissionOption, PermissionOptionKind, Verdict

__all__ = ["Answer", "ApprovalRequest", "Approver", "ScriptedApprover"]

Answer = bool | PermissionOptionKind | None


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One question for the person. ``title`` is the agent's own title of the tool call (e.g.
    ``Write /work/NOTES.md`` or a command line), when it gave one; ``options`` the agent's
    options in the agent's order (empty: a yes / no question)."""

    verdict: Verdict
    options: tuple[PermissionOption, ...] = ()
    title: str | None = None

    @property
    def action(self) -> Action:
        return self.verdict.action


class Approver(Protocol):
    """Answers the asks of one run. ``ask`` may take as long as the person needs; the run's
    ``--max-runtime`` still bounds the run while it waits."""

    async def ask(self, request: ApprovalRequest) -> Answer: ...


@dataclass(slots=True)
class ScriptedApprover:
    """An approver that answers from a list, in order, and keeps what it was asked: for
    library callers that decide ahead of time, and for tests. When the list is spent every
    further ask is answered ``None`` (a deny)."""

    answers: Sequence[Answer]
    asked: list[ApprovalRequest] = field(default_factory=list)

    async def ask(self, request: ApprovalRequest) -> Answer:
        self.asked.append(request)
        index = len(self.asked) - 1
        return self.answers[index] if index < len(self.answers) else None
