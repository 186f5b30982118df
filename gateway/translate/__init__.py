"""Request translators, one module per (client format, upstream format) pair."""
