"""Stand-in for the retired azure-common: test_sb_client imports two of its exceptions and uses neither."""


class AzureHttpError(Exception):
    pass


class AzureConflictHttpError(AzureHttpError):
    pass
