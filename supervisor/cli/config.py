"""``asup config enable | disable | show``."""

from __future__ import annotations

import os
import sys
from typing import Any

from supervisor.config import config_path, disable, enable, load_config, render_config
from supervisor.errors import ConfigError


def config_command(args: Any) -> int:
    path = config_path(env=os.environ)
    try:
        if args.config_command == "enable":
            enable(path)
            print(f"asup is enabled for this user ({path})")
        elif args.config_command == "disable":
            disable(path)
            print(f"asup is disabled for this user ({path})")
        else:
            print(f"# {path}")
            print(render_config(load_config(path)), end="")
    except ConfigError as exc:
        print(f"asup config: {exc}", file=sys.stderr)
        return 1
    return 0
