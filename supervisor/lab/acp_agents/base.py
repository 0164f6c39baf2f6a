"""The per-agent half of the ACP lab: what one ACP agent needs to be recorded.

:mod:`supervisor.lab.acp_record` does everything that is the same for every agent: the work
dir (a scratch git repo, a per-run HOME and TMPDIR), ``unshare --net`` (only ``lo``), the
:class:`~supervisor.lab.server.FakeModelServer` on 127.0.0.1, the ACP client that records every
JSON-RPC message both ways, cancelling, stopping the agent, scrubbing, the meta file and the
output. What differs per agent sits behind :class:`AcpAgentLab`:

- ``agent_id`` (the registry id and the fixture directory), ``version`` (the pinned version the
  fixtures are recorded under), ``binary`` and ``install_hint``;
- ``scenarios``: the scenario scripts (:class:`AcpScenario`);
- :meth:`AcpAgentLab.launch`: argv, env and HOME files. The default is the product's own launch
  recipe (:func:`supervisor.acp.recipes.acp_recipe` with the fake server as ``--endpoint``) and
  the product's env builder (:func:`supervisor.env.build_child_env`) over a host environment of
  PATH, the locale, a lab identity and a dummy signing key: the lab records the agent exactly as
  ``asup run`` launches it, only without bubblewrap (the namespace is the lab's boundary);
- ``stdin_close_grace_s``: how long to wait for the agent to exit after stdin closes before
  SIGTERM (opencode exits by itself; claude-agent-acp and codex-acp need the signal).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

from supervisor.acp.recipes import acp_recipe
from supervisor.env import build_child_env
from supervisor.lab.script import Reply, Text, Thinking, ToolCall
from supervisor.registry import Mode, get_agent

__all__ = [
    "ACP_VENDOR",
    "LAB_HOST_ENV",
    "AcpAgentLab",
    "AcpContext",
    "AcpLaunch",
    "AcpScenario",
    "Answer",
    "CancelWhen",
    "http_500",
    "plain_text",
    "read_file",
    "scenario_set",
    "write_file",
]

ACP_VENDOR = Path(__file__).resolve().parents[3] / "vendor"
# The host environment the lab pretends to come from: nothing of the real host but PATH.
LAB_HOST_ENV: dict[str, str] = {"LANG": "C.UTF-8", "USER": "lab", "LOGNAME": "lab"}

Answer = Literal["allow", "reject"]
CancelWhen = Literal["timeout", "hold"]


@dataclass(frozen=True, slots=True)
class AcpScenario:
    """One prompt against a scripted model. ``<repo>`` in tool inputs (and in custom tool
    input strings) is bound to the scratch repo.

    ``answer``: how the client answers every permission request (``allow``: the agent's
    ``allow_once`` option; ``reject``: its ``reject_once`` option, else ``reject_always``, else
    the ``cancelled`` outcome). ``cancel``: when the client sends ``session/cancel`` —
    ``"timeout"`` (default) after ``timeout_s`` without an answer; ``"hold"`` as soon as the
    fake server holds a reply open (``Reply(hold_after_events=N)``) plus ``cancel_delay_s``.
    ``env``: extra variables for the agent (written over the recipe's)."""

    name: str
    description: str
    prompt: str
    replies: tuple[Reply, ...]
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 90.0
    mode: Mode = Mode.READ_ONLY
    answer: Answer = "allow"
    cancel: CancelWhen = "timeout"
    cancel_delay_s: float = 1.0


@dataclass(frozen=True, slots=True)
class AcpContext:
    """Where one scenario runs; ``base_url`` is the fake server (``http://127.0.0.1:<port>``)."""

    scenario: AcpScenario
    workdir: Path
    base_url: str

    @property
    def repo(self) -> Path:
        return self.workdir / "repo"

    @property
    def home(self) -> Path:
        return self.workdir / "home"

    @property
    def tmpdir(self) -> Path:
        return self.workdir / "tmp"


@dataclass(frozen=True, slots=True)
class AcpLaunch:
    """``argv`` (binary first, absolute), the agent's whole ``env``, and ``home_files``
    (path relative to HOME → content) written just before the agent starts."""

    argv: list[str]
    env: dict[str, str]
    home_files: dict[str, str]


class AcpAgentLab:
    """How to record one ACP agent (module docstring). Subclasses set the class variables and
    ``scenarios``; most need nothing else."""

    agent_id: ClassVar[str]
    version: ClassVar[str]
    binary_rel: ClassVar[str]  # under vendor/
    install_hint: ClassVar[str]
    dummy_key: ClassVar[str] = "lab-dummy-key-not-a-secret"
    model: ClassVar[str | None] = None  # --model for the recipe (None: the recipe's default)
    stdin_close_grace_s: ClassVar[float] = 0.5
    scenarios: ClassVar[dict[str, AcpScenario]]

    @property
    def binary(self) -> Path:
        return ACP_VENDOR / self.binary_rel

    def installed(self) -> bool:
        return self.binary.exists()

    def host_env(self, path: str) -> dict[str, str]:
        """The pretend host: PATH, the locale, a lab identity, the dummy signing key."""
        return {"PATH": path, **LAB_HOST_ENV, get_agent(self.agent_id).signing_key: self.dummy_key}

    def launch(self, ctx: AcpContext, *, path: str) -> AcpLaunch:
        """The product's launch of this agent against ``ctx.base_url`` (module docstring)."""
        spec = get_agent(self.agent_id)
        recipe = acp_recipe(
            spec,
            mode=ctx.scenario.mode,
            home=str(ctx.home),
            now_ms=time.time_ns() // 1_000_000,
            endpoint=ctx.base_url,
            model=self.model,
        )
        extra = {**recipe.env, **ctx.scenario.env}
        env = build_child_env(
            self.host_env(path), spec, home=str(ctx.home), tmpdir=str(ctx.tmpdir), extra=extra
        )
        argv = [str(self.binary), *recipe.argv[1:]]
        return AcpLaunch(argv, dict(env.vars), dict(recipe.home_files))

    def placeholders(self) -> dict[str, str]:
        """Vendor paths → placeholders (the work dir's are the recorder's)."""
        return {
            str(self.binary.parent): "<vendor-bin>",
            str(self.binary.parents[1]): "<vendor-modules>",
        }


# -- the scenarios every agent is recorded with (only the tool calls differ) -----------------

APP = "<repo>/src/app.py"
NOTES = "greeter: a tiny module that greets.\n"
THOUGHT = "The user wants a short greeting. No tools are needed."


def scenario_set(*scenarios: AcpScenario) -> dict[str, AcpScenario]:
    return {s.name: s for s in scenarios}


def plain_text(description: str, thought: str = THOUGHT) -> AcpScenario:
    reply = Reply((Thinking(thought), Text("Hello from the lab.")))
    return AcpScenario("plain_text", description, "Say hello to the lab.", (reply,))


def read_file(description: str, call: ToolCall) -> AcpScenario:
    """The model reads src/app.py with ``call`` and answers from it."""
    return AcpScenario(
        "read_file",
        description,
        "What does greet() in src/app.py return?",
        (
            Reply((Text("Let me look."), call)),
            Reply((Text("greet() returns 'hello ' followed by the name."),)),
        ),
    )


def write_file(description: str, call: ToolCall) -> AcpScenario:
    """The model creates NOTES.md (content :data:`NOTES`) with ``call``; a write run whose
    permission request is answered allow (once)."""
    return AcpScenario(
        "write_file",
        description,
        "Create NOTES.md with a one-line summary of the project.",
        (Reply((call,)), Reply((Text("Created NOTES.md."),))),
        mode=Mode.WORKTREE_WRITE,
    )


def http_500(
    description: str,
    *,
    repeat: int = 10,
    env: dict[str, str] | None = None,
    timeout_s: float = 90.0,
) -> AcpScenario:
    """Every model request answers HTTP 500."""
    return AcpScenario(
        "http_500",
        description,
        "Say hello.",
        (Reply(http_status=500, repeat=repeat),),
        env=env or {},
        timeout_s=timeout_s,
    )
