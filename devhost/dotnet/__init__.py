"""Values in the forms the .NET Functions host writes them in, for what devhost hands the worker.

``values``: timestamps, TimeSpans, decimals and property values as the host's trigger metadata and binding
data carry them; ``json_net``: a message body read and written back by Json.NET, as an untyped batch gets
it. Pure: no I/O, used by the channel's trigger data and the Service Bus message reading alike, so a
package of their own rather than either side's.
"""
