"""The core's tests take their fixtures from the ``sts_core.testing`` pytest plugin, loaded
here for a run of this folder alone (an unpacked sts-core sdist); in the repository the root
``pyproject.toml`` loads it with ``-p sts_core.testing``."""

pytest_plugins = ["sts_core.testing"]
