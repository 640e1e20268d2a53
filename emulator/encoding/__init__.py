"""The emulator's own parts of AMQP encoding: batches, management request bodies, and application-property
edits that keep every untouched entry's bytes. The type system, value codec and message sections are
Busbar's one codec, :mod:`shared.amqp.encoding`.

Below both the broker and the protocol state machine (:mod:`emulator.amqp`); imports neither.
"""
