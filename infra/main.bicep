// Busbar in one resource group: Service Bus namespace with the fallback topic, Functions host storage,
// the ADLS Gen2 failure archive, monitoring, a Flex Consumption Function App (Python 3.13) with a
// system-assigned identity, and the least-privilege role assignments it needs.
//
//   az deployment group create --resource-group <rg> --template-file infra/main.bicep \
//     --parameters infra/main.parameters.json
//
// Then publish the code with `func azure functionapp publish <functionAppName>` (docs/deployment.md).

targetScope = 'resourceGroup'

@description('Short lowercase name that prefixes every resource (3-11 letters and digits).')
@minLength(3)
@maxLength(11)
param baseName string

param location string = resourceGroup().location

@description('Service Bus tier: Standard (shared, 256 KB messages) or Premium (dedicated messaging units).')
@allowed([
  'Standard'
  'Premium'
])
param serviceBusSku string = 'Standard'

@description('Premium messaging units (ignored for Standard).')
@allowed([
  1
  2
  4
  8
  16
])
param serviceBusPremiumCapacity int = 1

@description('Topic for events without a topic of their own (app setting BUSBAR_FALLBACK_TOPIC).')
param fallbackTopicName string = 'busbar-fallback'

@description('Catch-all subscription of the fallback router on the fallback topic (BUSBAR_ROUTER_SUBSCRIPTION).')
param routerSubscriptionName string = 'busbar-router'

@description('Routing mode of the fallback topic (BUSBAR_FALLBACK_ROUTING_MODE).')
@allowed([
  'CorrelationFilter'
  'SqlLikeFilter'
])
param fallbackRoutingMode string = 'CorrelationFilter'

@description('NServiceBus TopologyOptions JSON (AzureServiceBus__TopologyOptions); empty: topic-per-event without mappings.')
param topologyOptions string = ''

@description('Entity-path prefix (BUSBAR_HIERARCHY_NAMESPACE); empty: none. Every queue and topic Busbar declares, provisions and listens on becomes <prefix>/<name>.')
param hierarchyNamespace string = ''

@description('Duplicate-detection window of every topic and endpoint queue (BUSBAR_DUPLICATE_DETECTION_WINDOW): ISO 8601, PT20S to P7D. Fixed when an entity is created.')
param duplicateDetectionWindow string = 'PT10M'

@description('Endpoint names or patterns the provisioning API may provision besides the hosted ones (BUSBAR_PROVISIONABLE_ENDPOINTS); empty: any valid name.')
param provisionableEndpoints string = ''

@description('The app provisions the queues, topics and subscriptions of the endpoints it hosts when it starts, under the provisioning lock, with its managed identity (BUSBAR_PROVISION_ON_START). false: run python -m shared.topology apply per endpoint as a deployment step instead (docs/deployment.md).')
param provisionOnStart bool = true

@description('NCronTab schedule of the dead-letter re-drive (BUSBAR_REDRIVE_SCHEDULE).')
param redriveSchedule string = '0 */5 * * * *'

@description('Entities the re-drive covers (BUSBAR_REDRIVE_ENTITIES); empty: every queue and subscription.')
param redriveEntities string = ''

@description('JSON re-drive policy merged over the defaults (BUSBAR_REDRIVE_POLICY); empty: the defaults.')
param redrivePolicy string = ''

@description('Container (file system) of the Parquet failure archive.')
param archiveContainerName string = 'archive'

@description('Flex Consumption: most instances the app scales out to.')
param maximumInstanceCount int = 40

@description('Flex Consumption: memory per instance in MB.')
@allowed([
  2048
  4096
])
param instanceMemoryMB int = 2048

@description('Zone redundancy: the Flex Consumption plan spreads instances over availability zones (the platform then keeps at least two always-ready instances per function group, billed) and the host storage becomes ZRS. Only in regions that offer it: az functionapp list-flexconsumption-locations --zone-redundant=true.')
param zoneRedundant bool = false

@description('Replication of the failure archive account (ADLS Gen2); geo-redundant by default.')
@allowed([
  'Standard_GRS'
  'Standard_GZRS'
  'Standard_RAGRS'
  'Standard_RAGZRS'
  'Standard_LRS'
  'Standard_ZRS'
])
param archiveStorageSku string = 'Standard_GRS'

@description('Dead-letter alert threshold per entity.')
param deadLetterAlertThreshold int = 0

@description('E-mail notified by the dead-letter alert (empty: no notification).')
param alertEmail string = ''

param tags object = {
  application: 'busbar'
}

// Globally unique names derive from the resource group, so a redeploy reuses the same resources.
var suffix = take(uniqueString(resourceGroup().id), 8)
var serviceBusNamespaceName = '${baseName}-sb-${suffix}'
var hostStorageAccountName = toLower('${baseName}host${suffix}')
var archiveStorageAccountName = toLower('${baseName}arch${suffix}')
var deploymentContainerName = 'app-package'
var functionAppName = '${baseName}-func-${suffix}'

module serviceBus 'modules/servicebus.bicep' = {
  name: 'servicebus'
  params: {
    namespaceName: serviceBusNamespaceName
    location: location
    sku: serviceBusSku
    premiumCapacity: serviceBusPremiumCapacity
    fallbackTopicName: fallbackTopicName
    routerSubscriptionName: routerSubscriptionName
    hierarchyNamespace: hierarchyNamespace
    duplicateDetectionWindow: duplicateDetectionWindow
    provisioningLockQueueName: 'busbar-provisioning-locks'
    tags: tags
  }
}

module storage 'modules/storage.bicep' = {
  name: 'storage'
  params: {
    location: location
    hostAccountName: hostStorageAccountName
    archiveAccountName: archiveStorageAccountName
    deploymentContainerName: deploymentContainerName
    archiveContainerName: archiveContainerName
    zoneRedundant: zoneRedundant
    archiveSku: archiveStorageSku
    tags: tags
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  params: {
    location: location
    workspaceName: '${baseName}-log-${suffix}'
    appInsightsName: '${baseName}-appi-${suffix}'
    tags: tags
  }
}

module functionApp 'modules/functionapp.bicep' = {
  name: 'functionapp'
  params: {
    location: location
    planName: '${baseName}-plan-${suffix}'
    appName: functionAppName
    tags: tags
    hostStorageAccountName: storage.outputs.hostAccountName
    deploymentContainerUrl: storage.outputs.deploymentContainerUrl
    serviceBusNamespaceName: serviceBus.outputs.namespaceName
    serviceBusFullyQualifiedNamespace: serviceBus.outputs.fullyQualifiedNamespace
    topologyOptions: topologyOptions
    fallbackTopicName: serviceBus.outputs.fallbackTopicName
    fallbackRoutingMode: fallbackRoutingMode
    routerSubscriptionName: serviceBus.outputs.routerSubscriptionName
    hierarchyNamespace: hierarchyNamespace
    duplicateDetectionWindow: duplicateDetectionWindow
    provisionableEndpoints: provisionableEndpoints
    provisionOnStart: provisionOnStart
    redriveSchedule: redriveSchedule
    redriveEntities: redriveEntities
    redrivePolicy: redrivePolicy
    archiveAccountName: storage.outputs.archiveAccountName
    archiveContainerName: storage.outputs.archiveContainerName
    appInsightsConnectionString: monitoring.outputs.connectionString
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
    zoneRedundant: zoneRedundant
  }
}

module roles 'modules/roles.bicep' = {
  name: 'roles'
  params: {
    principalId: functionApp.outputs.principalId
    serviceBusNamespaceName: serviceBus.outputs.namespaceName
    hostStorageAccountName: storage.outputs.hostAccountName
    archiveAccountName: storage.outputs.archiveAccountName
    archiveContainerName: storage.outputs.archiveContainerName
    appInsightsName: monitoring.outputs.appInsightsName
  }
}

module alerts 'modules/alerts.bicep' = {
  name: 'alerts'
  params: {
    namespaceId: serviceBus.outputs.namespaceId
    alertName: '${baseName}-dlq-${suffix}'
    threshold: deadLetterAlertThreshold
    notifyEmail: alertEmail
    tags: tags
  }
}

output functionAppName string = functionApp.outputs.appName
output functionAppHostName string = functionApp.outputs.defaultHostName
output serviceBusNamespace string = serviceBus.outputs.namespaceName
output appInsightsName string = monitoring.outputs.appInsightsName
output serviceBusFullyQualifiedNamespace string = serviceBus.outputs.fullyQualifiedNamespace
output archiveStorageAccount string = storage.outputs.archiveAccountName
output archiveContainer string = storage.outputs.archiveContainerName
// The same archive for the Databricks replay job (Spark's ABFS driver wants the account in the URL).
output archiveAbfssUrl string = 'abfss://${storage.outputs.archiveContainerName}@${storage.outputs.archiveAccountName}.dfs.${environment().suffixes.storage}/deadletters'
