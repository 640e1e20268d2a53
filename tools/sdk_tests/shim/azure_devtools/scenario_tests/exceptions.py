class AzureTestError(Exception):
    pass


class ReservedResourceNameError(Exception):
    pass
