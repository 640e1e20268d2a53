"""AMQP 1.0 encoding: the type system, value codec and message sections.

Below both the broker and the protocol state machine (:mod:`emulator.amqp`); imports neither.
"""
