"""Agent Client Protocol (ACP) support: folding an ACP session's messages into run events."""

from supervisor.acp.fold import AcpFold, outcome_for_stop_reason

__all__ = ["AcpFold", "outcome_for_stop_reason"]
