"""Busbar: a pure-Python Azure Service Bus emulator."""
