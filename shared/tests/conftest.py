"""The core's tests take their fixtures from the ``sts_core.testing`` pytest plugin."""
