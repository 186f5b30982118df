"""HTTP handlers, one module per client endpoint, sharing one exchange flow."""
