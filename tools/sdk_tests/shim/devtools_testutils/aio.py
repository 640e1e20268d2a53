def recorded_by_proxy_async(fn):
    return fn
