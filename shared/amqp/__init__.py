"""Busbar's side of the seam to the AMQP wire (docs/architecture.md, "The seam to the AMQP wire"): its own
client (connecting with a token put on ``$cbs``, receiving, peeking and settling with python-qpid-proton's
public API, every application property read into Busbar's one typed-value model), and its one codec
(:mod:`shared.amqp.encoding`, stdlib-only: the emulator speaks the wire with it, devhost and the trigger edge
read the bytes the Functions host hands over with it). Proton is imported only by the client's modules."""
