"""``hta.analyzers``: the analyses HTA's notebooks import by module."""
