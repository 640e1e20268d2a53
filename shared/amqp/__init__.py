"""Busbar's own AMQP client side of the seam to the wire (docs/architecture.md, "The seam to the AMQP
wire"): connecting with a token put on ``$cbs``, receiving, peeking and settling with python-qpid-proton's
public API, every application property read into Busbar's one typed-value model."""
