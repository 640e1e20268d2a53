"""AMQP 1.0 framing and the connection state machine the azure-servicebus SDK talks to.

The type system, codec and message sections it speaks are Busbar's one codec, :mod:`shared.amqp.encoding`
(the emulator's own encoding parts: :mod:`emulator.encoding`).
"""
