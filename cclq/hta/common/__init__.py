"""``hta.common``."""
