"""The bridge script starts in front of every restricted child: what it imports before the exec.

It must import nothing beyond what the interpreter has loaded already (``posix``, ``sys``) and
the C modules ``_socket``, ``_stat``, ``errno`` and ``fcntl`` until it has exec'd the child: not
``os`` or ``socket`` (which alone loads ``selectors``, ``collections`` and ``enum``). ``socket``,
``signal``, ``asyncio`` and the rest belong to the forked relay.
"""

from __future__ import annotations

import ast
import json
import socket
import subprocess
import sys
from pathlib import Path

from supervisor.sandbox import relay

SCRIPT = str(Path(relay.__file__).resolve())
ALLOWED = ("_socket", "_stat", "errno", "fcntl", "posix", "sys")

# Run in a fresh ``python -I -S``: the modules loaded by the script up to the exec, with
# ``posix.fork`` pretending to be the parent and ``posix.execv`` reporting instead of exec'ing.
PROBE = """
import posix, sys
before = set(sys.modules)
script, sock, port, forward = sys.argv[1:5]
sys.argv = [script, "--listen", "127.0.0.1:" + port, "--unix", sock, "--forward",
            forward + "=m:1", "--danger-no-isolation-check", "--", "/bin/true"]
namespace = {"__name__": "relay_probe", "__file__": script}
exec(compile(open(script).read(), script, "exec"), namespace)
posix.fork = lambda: 4242
def execv(file, args):
    loaded = sorted(set(sys.modules) - before)
    import json
    print(json.dumps(loaded), flush=True)
    posix._exit(0)
posix.execv = execv
namespace["_interfaces"]()  # the isolation check's ioctl path, switched off below
sys.exit(namespace["main"]())
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _modules_of(code: str, *args: str, cwd: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, *args],
        env={},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_script_imports_only_the_allowed_modules_at_its_top_level() -> None:
    tree = ast.parse(Path(SCRIPT).read_text())
    imported: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        assert not isinstance(node, ast.ImportFrom), "from-imports at the top level"
    assert imported == set(ALLOWED)


def test_nothing_else_is_imported_before_the_exec(tmp_path: Path) -> None:
    sock_path = str(tmp_path / "p.sock")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(sock_path)
        loaded = _modules_of(
            PROBE, SCRIPT, sock_path, str(_free_port()), str(_free_port()), cwd=tmp_path
        )
    floor = _modules_of(
        "import sys\n"
        "before = set(sys.modules)\n"
        f"import {', '.join(ALLOWED)}\n"
        "loaded = sorted(set(sys.modules) - before)\n"
        "import json\n"
        "print(json.dumps(loaded))\n",
        cwd=tmp_path,
    )
    assert "_socket" in loaded
    assert set(loaded) <= set(floor), sorted(set(loaded) - set(floor))
    assert not {"asyncio", "os", "signal", "socket", "struct"} & set(loaded), loaded
