"""The audit trail: a record per exchange, written off the request path, read by `gateway audit`."""
