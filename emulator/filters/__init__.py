"""Subscription rule filters and actions: the Service Bus SQL filter / rule-action language.

The public API is in :mod:`emulator.filters.sql`.
"""
