"""AMQP 1.0 codec, framing and the connection state machine the azure-servicebus SDK talks to."""
