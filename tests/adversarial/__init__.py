"""The red team's attacks on the grader, kept as tests."""
import pytest

# A class batch under real time limits (the class of attacks, the rush, the stopped clocks): minutes of one
# worker, so `make test-integration` runs it and `make test` stays under 15 minutes.
CLASS_BATCH = pytest.mark.integration
