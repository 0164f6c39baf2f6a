"""agent-supervisor: supervised, contained, reviewable runs of installed coding CLIs."""

__version__ = "0.1.0"
