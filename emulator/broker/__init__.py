"""Broker core: entities, messages, locks and the durable store, independent of the AMQP wire."""
