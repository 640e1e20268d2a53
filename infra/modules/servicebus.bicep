// Service Bus namespace and Busbar's own entities.
//
// Topic-per-event topics and their subscriptions are NOT declared here: the provisioning function
// creates them on demand through azure-mgmt-servicebus (see docs/topology-guide.md). Only the entities
// Busbar's functions bind to before any subscription exists are declared: the fallback topic with the
// router's catch-all subscription, and the input queues of the endpoints this app hosts. Their properties
// match what the provisioner creates (BUSBAR_ENTITY_*: 5 min lock, 10 deliveries, 5 GB; duplicate
// detection over BUSBAR_DUPLICATE_DETECTION_WINDOW, immutable once an entity exists: the app refuses to
// start on an endpoint queue or topic created without it, see docs/topology-guide.md).
// Local (SAS) authentication is off: every client uses Microsoft Entra ID (the managed identity).
//
// Under a hierarchy namespace (BUSBAR_HIERARCHY_NAMESPACE) these entities are <ns>/<name>, where the app
// provisions and listens. '/' is reserved in ARM resource names, so the template spells the path with '~'
// in its place, the form Azure's own tooling uses for entity paths with '/'
// (Azure/azure-resource-manager-schemas#230); the entity's path is then <ns>/<name>.

@description('Service Bus namespace name (6-50 characters, globally unique).')
param namespaceName string

param location string

@description('Standard or Premium. Premium gives dedicated messaging units, 100 MB messages and 80 GB topics.')
@allowed([
  'Standard'
  'Premium'
])
param sku string

@description('Messaging units (Premium only): 1, 2, 4, 8 or 16.')
@allowed([
  1
  2
  4
  8
  16
])
param premiumCapacity int

@description('Fallback topic for events that have no topic of their own (BUSBAR_FALLBACK_TOPIC).')
param fallbackTopicName string

@description('Catch-all subscription of the fallback router on the fallback topic (BUSBAR_ROUTER_SUBSCRIPTION).')
param routerSubscriptionName string

@description('Entity-path prefix (BUSBAR_HIERARCHY_NAMESPACE); empty: none.')
param hierarchyNamespace string

@description('Duplicate-detection window of the topic and endpoint queues (BUSBAR_DUPLICATE_DETECTION_WINDOW).')
param duplicateDetectionWindow string

@description('Session-enabled queue whose session locks serialise provisioning (BUSBAR_PROVISIONING_LOCK_QUEUE).')
param provisioningLockQueueName string

// ARM spelling of the hierarchy prefix ('/' is reserved in resource names).
var armPrefix = empty(hierarchyNamespace) ? '' : '${replace(hierarchyNamespace, '/', '~')}~'

param tags object

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' = {
  name: namespaceName
  location: location
  tags: tags
  sku: {
    name: sku
    tier: sku
    capacity: sku == 'Premium' ? premiumCapacity : null
  }
  properties: {
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
  }
}

resource fallbackTopic 'Microsoft.ServiceBus/namespaces/topics@2024-01-01' = {
  parent: namespace
  name: '${armPrefix}${fallbackTopicName}'
  properties: {
    maxSizeInMegabytes: 5120
    enableBatchedOperations: true
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: duplicateDetectionWindow
  }
}

// No rules given: the subscription keeps its default match-all rule, as a catch-all must.
resource routerSubscription 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2024-01-01' = {
  parent: fallbackTopic
  name: routerSubscriptionName
  properties: {
    lockDuration: 'PT5M'
    maxDeliveryCount: 10
    deadLetteringOnFilterEvaluationExceptions: false
  }
}

// The endpoints' input queues (and an ordered endpoint's hold queue) are not declared here: the app
// provisions the endpoints it hosts when it starts (BUSBAR_PROVISION_ON_START, docs/deployment.md), so a new
// endpoint needs no edit of this template.

// Never holds a message: provisioning requests lock its sessions (shared/api/provisioning/lock.py). The lock
// duration is the longest Service Bus allows, longer than any HTTP request lives.
resource provisioningLockQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = {
  parent: namespace
  name: '${armPrefix}${provisioningLockQueueName}'
  properties: {
    requiresSession: true
    lockDuration: 'PT5M'
    maxSizeInMegabytes: 1024
  }
}

output namespaceName string = namespace.name
output namespaceId string = namespace.id
// <name>.servicebus.windows.net, for ServiceBusConnection__fullyQualifiedNamespace
output fullyQualifiedNamespace string = split(replace(namespace.properties.serviceBusEndpoint, 'https://', ''), ':')[0]
// The app setting holds the name without the hierarchy prefix: the app adds it.
output fallbackTopicName string = fallbackTopicName
output routerSubscriptionName string = routerSubscription.name
