"""``asup review``, ``asup apply`` and ``asup discard``: look at, land or drop a run's change.

The wiring in ``supervisor/cli/main.py`` (inside ``_parser()``, after the ``runs`` parser)::

    rv = sub.add_parser("review", help="show the change a run left for review")
    rv.add_argument("run_id")
    rv.add_argument("--json", action="store_true", help="print one JSON object")
    apl = sub.add_parser(
        "apply", help="land a run's reviewed change as a new branch (asks for its hash)"
    )
    apl.add_argument("run_id")
    apl.add_argument(
        "--allow-flagged", action="store_true", help="also land a change the review flagged"
    )
    apl.add_argument("--repo", help="the repository (default: the one the run was made in)")
    dsc = sub.add_parser("discard", help="drop a run's pending change without landing it")
    dsc.add_argument("run_id")

and in ``main()``, before the final ``parser.error``::

    if args.command in ("review", "apply", "discard"):
        from supervisor.cli import review as review_cli

        command = {
            "review": review_cli.review_command,
            "apply": review_cli.apply_command,
            "discard": review_cli.discard_command,
        }[args.command]
        return command(args)

Exit codes: 0 done, 1 refused or failed (the message says which), 2 usage.
"""
