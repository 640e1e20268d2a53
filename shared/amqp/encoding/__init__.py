"""Busbar's one AMQP 1.0 codec: the type system (:mod:`.types`, over :mod:`shared.envelope.properties`' value
classes), the value codec (:mod:`.codec`), message sections (:mod:`.sections`) and the typed reading of a
message's application properties (:mod:`.application_properties`).

Pure and stdlib-only: it imports nothing of Busbar but :mod:`shared.envelope.properties`, and no ``azure``
or ``proton``, because the emulator (which never imports an Azure SDK) speaks the wire with it, and devhost
and the trigger edge read the bytes the Functions host hands over with it (tests/test_layers.py pins both).
"""
