"""``hta.utils``."""
