"""The management port: health check and the Azure Resource Manager REST subset for Microsoft.ServiceBus
that ``azure-mgmt-servicebus``'s ServiceBusManagementClient speaks (queues, topics, subscriptions, rules)."""
