"""Upstream providers: one module per wire protocol, behind the `providers.base.Provider` seam."""
