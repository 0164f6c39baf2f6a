"""The vendor lab: a scripted fake model server and a recorder for real vendor CLIs.

Test and demo infrastructure. Nothing in the supervisor proper imports it.
"""
