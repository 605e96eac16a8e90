"""sts_core."""
