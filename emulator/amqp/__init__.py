"""AMQP 1.0 framing and the connection state machine the azure-servicebus SDK talks to.

The type system, codec and message sections it speaks are in :mod:`emulator.encoding`.
"""
