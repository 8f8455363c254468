"""``hta.utils.utils``: the helpers HTA's notebooks import."""

from cclq.api.hta_frames import flatten_column_names
from cclq.api.hta_trace import shorten_name

__all__ = ["flatten_column_names", "shorten_name"]
