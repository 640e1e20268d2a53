def add_remove_header_sanitizer(*a, **k):
    pass


def add_general_regex_sanitizer(*a, **k):
    pass


def add_oauth_response_sanitizer(*a, **k):
    pass
