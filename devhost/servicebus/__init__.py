"""Service Bus triggers as the host's extension serves them, on the host's side of the worker channel.

``listener`` (one per function: PEEK_LOCK receive, complete / abandon, ``maxConcurrentCalls``, batches with
``batch_cache``'s minimum sizes, locks renewed by ``lock_renewal``) and ``session_listener`` (session-enabled
entities) receive through Busbar's seam to the wire (``shared.amqp.async_receiver``, python-qpid-proton). A
received message becomes plain data for the worker (``message_reading``; ``model_binding_data`` for SDK-type
parameters, from the AMQP bytes it arrived with). A function that settles itself does it through the
extension's Settlement gRPC service: ``settlement`` (who holds which message, and what each call does to it)
and ``settlement_service`` (the ``grpc.aio`` server on the host's loop).

Everything here talks to a Service Bus namespace and runs in devhost's own process, on the loop that holds
the receivers.
"""
