"""The end-to-end tests' shared code lives in helpers.py; its assertions are rewritten as a test
module's are, so a failing check in a helper reports its values."""

import pytest

pytest.register_assert_rewrite("helpers")
