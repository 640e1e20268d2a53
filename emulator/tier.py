"""The namespace's pricing tier (``Standard``, the default, or ``Premium``) and what it decides here: the
largest message a queue or topic takes, and whether a management request may set it.

What Azure does (the evidence; both management planes answer alike):

- Standard: the maximum message size is fixed at 256 KB, and a queue or topic PUT that carries
  ``maxMessageSizeInKilobytes`` (ARM) or ``<MaxMessageSizeInKilobytes>`` (ATOM) is refused whatever the
  value, with HTTP 400 ``MessagingGatewayBadRequest`` "SubCode=40000. Bad Request. To know more visit
  https://aka.ms/sbResourceMgrExceptions." (Microsoft Learn, service-bus-resource-manager-exceptions: "This
  error occurs when you try to create a queue in a non-premium tier namespace with a value set to the
  property maxMessageSizeInKilobytes"; reported for queues over api-version 2022-01-01-preview in
  MicrosoftDocs/azure-docs#104074, for topics in Azure/ResourceModules#2629, for a Standard queue from the
  terraform azurerm provider in hashicorp/terraform-provider-azurerm#28576). Azure's message names no
  property; the emulator's keeps the code and prefix and says which property and why. A GET still reports
  256 (terraform-provider-azurerm servicebus_queue_resource.go: "output of `max_message_size_in_kilobytes`
  is also set in non-Premium namespaces, with a value of 256"), so the ARM converters cannot tell a
  round-tripped 256 from a chosen one, and neither does Azure, which is why that provider never sends 256.
- Premium: the property is accepted from 1024 to 102400 KB and defaults to 1024; out of range Azure answers
  "SubCode=40000. The property value for 'MaxMessageSizeInKilobytes' must be between 1024 and 102400 when
  the namespace '<name>' is using 'Premium' tier." (quoted in Azure/ResourceModules#2629).

The ARM SKU of a Premium namespace carries a capacity (messaging units); the emulator reports 1.
"""

from __future__ import annotations

from enum import StrEnum

from emulator import limits


class Sku(StrEnum):
    """A namespace's SKU name, which is also its tier."""

    STANDARD = "Standard"
    PREMIUM = "Premium"


PREMIUM_MESSAGING_UNITS = 1


def default_max_message_size_in_kilobytes(sku: Sku) -> int:
    """What a queue or topic created without the property gets: Standard's fixed size, Premium's default."""
    if sku is Sku.PREMIUM:
        return limits.PREMIUM_MAX_MESSAGE_SIZE_IN_KILOBYTES_DEFAULT
    return limits.STANDARD_MAX_MESSAGE_SIZE_IN_KILOBYTES


def max_message_size_problem(sku: Sku, namespace: str, kilobytes: int | None) -> str | None:
    """Why a management request's ``MaxMessageSizeInKilobytes`` (None: not in the request) is refused on
    this tier, or None if it is accepted."""
    if kilobytes is None:
        return None
    if sku is Sku.STANDARD:
        return (
            f"Bad Request. MaxMessageSizeInKilobytes can be set only on a Premium namespace; the namespace "
            f"'{namespace}' is using 'Standard' tier, where the maximum message size is fixed at "
            f"{limits.STANDARD_MAX_MESSAGE_SIZE_IN_KILOBYTES} KB."
        )
    low, high = limits.PREMIUM_MAX_MESSAGE_SIZE_IN_KILOBYTES_MIN, limits.MAX_MESSAGE_SIZE_IN_KILOBYTES_MAX
    if not low <= kilobytes <= high:
        return (
            f"The property value for 'MaxMessageSizeInKilobytes' must be between {low} and {high} when the "
            f"namespace '{namespace}' is using 'Premium' tier. Parameter name: MaxMessageSizeInKilobytes."
        )
    return None
