// Least-privilege role assignments for the Function App's system-assigned identity. Each assignment is
// scoped to the one resource it needs; none is at resource-group or subscription scope.
//
//  role                                  scope                       why
//  Azure Service Bus Data Sender         Service Bus namespace       publish events, re-drive dead letters
//  Azure Service Bus Data Receiver       Service Bus namespace       Service Bus triggers, dead-letter receivers
//  Contributor                           Service Bus namespace       provisioning over ARM (azure-mgmt-servicebus):
//                                                                    topics, subscriptions, rules
//  Storage Blob Data Owner               Functions host account      identity-based AzureWebJobsStorage and the
//                                                                    Flex Consumption deployment container
//  Storage Table Data Contributor        Functions host account      the endpoints' tables in AzureWebJobsStorage
//                                                                    (handled message ids, handlers' rows)
//  Storage Blob Data Contributor         archive container           write the Parquet failure archive
//  Monitoring Metrics Publisher          Application Insights        telemetry with Entra ID (local auth off)
//
// Azure Service Bus Data Owner is deliberately absent: Sender + Receiver cover the data plane and
// management goes through ARM with Contributor on the namespace only.

param principalId string
param serviceBusNamespaceName string
param hostStorageAccountName string
param archiveAccountName string
param archiveContainerName string
param appInsightsName string

// Built-in role definition ids (the same in every Azure cloud).
var serviceBusDataSender = '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'
var serviceBusDataReceiver = '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'
var contributor = 'b24988ac-6180-42a0-ab88-20f7382dd24c'
var storageBlobDataOwner = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
var storageBlobDataContributor = 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
var storageTableDataContributor = '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
var monitoringMetricsPublisher = '3913510d-42f4-4e42-8a64-420c390055eb'

resource serviceBus 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: serviceBusNamespaceName
}

resource hostStorage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: hostStorageAccountName
}

resource archiveAccount 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: archiveAccountName
}

resource archiveBlobs 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' existing = {
  parent: archiveAccount
  name: 'default'
}

resource archiveContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' existing = {
  parent: archiveBlobs
  name: archiveContainerName
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: appInsightsName
}

resource serviceBusSenderAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(serviceBus.id, principalId, serviceBusDataSender)
  scope: serviceBus
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataSender)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource serviceBusReceiverAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(serviceBus.id, principalId, serviceBusDataReceiver)
  scope: serviceBus
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiver)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource serviceBusContributorAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(serviceBus.id, principalId, contributor)
  scope: serviceBus
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', contributor)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource hostStorageOwnerAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(hostStorage.id, principalId, storageBlobDataOwner)
  scope: hostStorage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataOwner)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

// Tables only: read, write and delete entities and create tables; no blob or queue data, no account keys.
resource hostStorageTablesAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(hostStorage.id, principalId, storageTableDataContributor)
  scope: hostStorage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageTableDataContributor)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource archiveContributorAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(archiveContainer.id, principalId, storageBlobDataContributor)
  scope: archiveContainer
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataContributor)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource telemetryPublisherAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(appInsights.id, principalId, monitoringMetricsPublisher)
  scope: appInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisher)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}
