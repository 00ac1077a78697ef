"""Runs the pytest files named on the command line (one Bazel py_test each)."""

import os
import sys

import pytest

if __name__ == "__main__":
    # No cache directory in the (read-only) runfiles; tracebacks short enough to read.
    arguments = ["-p", "no:cacheprovider", "-q", "--tb=short",
                 "--rootdir", os.path.dirname(os.path.abspath(__file__))]
    sys.exit(pytest.main(arguments + sys.argv[1:]))
