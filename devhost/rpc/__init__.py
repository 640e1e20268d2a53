"""The FunctionRpc protocol the Functions host speaks with a language worker, as protobuf classes.

``azure-functions-runtime`` (the code Azure runs for a Python 3.13+ app) takes its requests and builds its
responses with these classes: the proxy worker hands it the module as ``protos``. See :mod:`.protos`.
"""
