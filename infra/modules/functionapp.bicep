// The Function App on the Flex Consumption plan (Python 3.13), with a system-assigned identity.
//
// Every app setting is in the one `appSettings` array below, one `{ name: '...' value: ... }` entry each,
// so tests/infra can read it from the parsed template: each setting the code declares (shared.app_settings) must be
// here unless it is local-only, and none may carry a key or connection string where the identity will do.
// Flex Consumption takes the runtime from functionAppConfig; FUNCTIONS_WORKER_RUNTIME and
// FUNCTIONS_EXTENSION_VERSION are not allowed as app settings on this plan.

param location string
param planName string
param appName string
param tags object

@description('Functions host storage account (identity-based AzureWebJobsStorage).')
param hostStorageAccountName string

@description('https://<account>.blob.core.windows.net/<container> for the deployment package.')
param deploymentContainerUrl string

@description('Service Bus namespace name.')
param serviceBusNamespaceName string

@description('<namespace>.servicebus.windows.net')
param serviceBusFullyQualifiedNamespace string

param appInsightsConnectionString string

@description('NServiceBus TopologyOptions JSON (AzureServiceBus__TopologyOptions); empty: topic-per-event, no mappings.')
param topologyOptions string

@description('Fallback topic for events without a topic of their own.')
param fallbackTopicName string

@description('Catch-all subscription of the fallback router on the fallback topic.')
param routerSubscriptionName string

@description('Routing mode of the fallback topic: CorrelationFilter or SqlLikeFilter.')
param fallbackRoutingMode string

@description('Entity-path prefix (NServiceBus HierarchyNamespace); empty: none.')
param hierarchyNamespace string

@description('Duplicate-detection window of every topic and endpoint queue (BUSBAR_DUPLICATE_DETECTION_WINDOW).')
param duplicateDetectionWindow string

@description('Endpoint names or patterns the provisioning API may provision besides the hosted ones; empty: any.')
param provisionableEndpoints string
@description('BUSBAR_PROVISION_ON_START: the app provisions its hosted endpoints when it starts.')
param provisionOnStart bool

@description('NCronTab schedule of the dead-letter re-drive timer.')
param redriveSchedule string

@description('Entities whose dead-letter queues are re-driven (comma-separated globs); empty: all.')
param redriveEntities string

@description('JSON re-drive policy merged over the defaults; empty: the defaults.')
param redrivePolicy string

@description('Archive storage account (ADLS Gen2), reached with the managed identity.')
param archiveAccountName string

@description('Archive container; the archive is written under abfs://<container>/deadletters.')
param archiveContainerName string

@description('Upper bound of instances the plan scales out to.')
param maximumInstanceCount int

@description('Spread the plan\'s instances over availability zones (regions that offer it for Flex Consumption only).')
param zoneRedundant bool

@description('Memory per instance in MB (2048 or 4096).')
@allowed([
  2048
  4096
])
param instanceMemoryMB int

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  // checkov:skip=CKV_AZURE_225: zone redundancy is the zoneRedundant parameter, off by default: only some regions offer it for Flex Consumption, and it keeps at least two always-ready instances per function group, billed
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true
    zoneRedundant: zoneRedundant
  }
}

resource app 'Microsoft.Web/sites@2024-04-01' = {
  name: appName
  location: location
  tags: tags
  kind: 'functionapp,linux'
  identity: {
    type: 'SystemAssigned'
  }
  // checkov:skip=CKV_AZURE_222: the HTTP API (docs/deployment.md) is called over the internet with function keys; closing public access needs a private endpoint and a virtual network this template does not build
  // checkov:skip=CKV_AZURE_17: callers authenticate with function keys; requiring client certificates would reject every documented caller (and Flex Consumption does not support platform certificate features)
  // checkov:skip=CKV_AZURE_212: numberOfWorkers is a Dedicated-plan setting; Flex Consumption scales each function group from zero (scaleAndConcurrency), and with zoneRedundant keeps at least two always-ready instances per group
  // checkov:skip=CKV_AZURE_213: Flex Consumption does not offer the App Service platform health check (healthCheckPath)
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    siteConfig: {
      minTlsVersion: '1.2'
      ftpsState: 'Disabled'
      http20Enabled: true
      appSettings: [
        {
          name: 'AzureWebJobsStorage__accountName'
          value: hostStorageAccountName
        }
        // The endpoints' tables live in the host account too; the account name alone names its blob and queue
        // services for the host, the table service is named explicitly (Functions' identity-based
        // AzureWebJobsStorage: __blobServiceUri / __queueServiceUri / __tableServiceUri per service).
        {
          name: 'AzureWebJobsStorage__tableServiceUri'
          value: 'https://${hostStorageAccountName}.table.${environment().suffixes.storage}'
        }
        {
          name: 'AzureWebJobsStorage__credential'
          value: 'managedidentity'
        }
        {
          name: 'APPLICATIONINSIGHTS_CONNECTION_STRING'
          value: appInsightsConnectionString
        }
        {
          name: 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING'
          value: 'Authorization=AAD'
        }
        // host.json's "telemetryMode": "OpenTelemetry": the Python worker exports its own logs and traces
        // (app/telemetry.py: azure-monitor-opentelemetry with the connection string above), and the host
        // does not repeat them (learn.microsoft.com/azure/azure-functions/opentelemetry-howto, Python).
        {
          name: 'PYTHON_ENABLE_OPENTELEMETRY'
          value: 'true'
        }
        {
          name: 'ServiceBusConnection__fullyQualifiedNamespace'
          value: serviceBusFullyQualifiedNamespace
        }
        {
          name: 'BUSBAR_SUBSCRIPTION_ID'
          value: subscription().subscriptionId
        }
        {
          name: 'BUSBAR_RESOURCE_GROUP'
          value: resourceGroup().name
        }
        {
          name: 'BUSBAR_NAMESPACE'
          value: serviceBusNamespaceName
        }
        {
          name: 'BUSBAR_MANAGEMENT_ENDPOINT'
          value: environment().resourceManager
        }
        {
          name: 'AzureServiceBus__TopologyOptions'
          value: topologyOptions
        }
        {
          name: 'BUSBAR_FALLBACK_TOPIC'
          value: fallbackTopicName
        }
        {
          name: 'BUSBAR_FALLBACK_ROUTING_MODE'
          value: fallbackRoutingMode
        }
        {
          name: 'BUSBAR_HIERARCHY_NAMESPACE'
          value: hierarchyNamespace
        }
        {
          name: 'BUSBAR_API_ENDPOINT_NAME'
          value: 'busbar-api'
        }
        {
          name: 'BUSBAR_REDRIVE_SCHEDULE'
          value: redriveSchedule
        }
        {
          name: 'BUSBAR_REDRIVE_ENTITIES'
          value: redriveEntities
        }
        {
          name: 'BUSBAR_REDRIVE_POLICY'
          value: redrivePolicy
        }
        {
          name: 'BUSBAR_REDRIVE_MAX_REDRIVES'
          value: '3'
        }
        {
          name: 'BUSBAR_HANDLED_RETENTION_DAYS'
          value: '7'
        }
        {
          name: 'BUSBAR_REDRIVE_MAX_MESSAGES'
          value: '1000'
        }
        {
          name: 'BUSBAR_REDRIVE_TIME_BUDGET_SECONDS'
          value: '240'
        }
        {
          name: 'BUSBAR_REDRIVE_RATE_PER_SECOND'
          value: '100'
        }
        {
          name: 'BUSBAR_ARCHIVE_URL'
          value: 'abfs://${archiveContainerName}/deadletters'
        }
        {
          name: 'BUSBAR_ARCHIVE_ACCOUNT_NAME'
          value: archiveAccountName
        }
        {
          name: 'BUSBAR_SAMPLE_ENDPOINTS'
          value: 'true'
        }
        {
          name: 'BUSBAR_ENDPOINT_MODULES'
          value: ''
        }
        {
          name: 'BUSBAR_ROUTER_SUBSCRIPTION'
          value: routerSubscriptionName
        }
        {
          name: 'BUSBAR_ROUTER_SNAPSHOT_SECONDS'
          value: '30'
        }
        {
          name: 'BUSBAR_ENTITY_LOCK_DURATION_SECONDS'
          value: '300'
        }
        {
          name: 'BUSBAR_DUPLICATE_DETECTION_WINDOW'
          value: duplicateDetectionWindow
        }
        {
          name: 'BUSBAR_ENTITY_MAX_DELIVERY_COUNT'
          value: '10'
        }
        {
          name: 'BUSBAR_ENTITY_MAX_SIZE_MB'
          value: '5120'
        }
        {
          name: 'BUSBAR_PROVISIONABLE_ENDPOINTS'
          value: provisionableEndpoints
        }
        {
          // The app provisions the endpoints it hosts at start-up (app/provision_on_start.py): adding an
          // endpoint needs no change here (docs/deployment.md).
          name: 'BUSBAR_PROVISION_ON_START'
          value: provisionOnStart ? 'true' : 'false'
        }
        {
          name: 'BUSBAR_PROVISIONING_LOCK_QUEUE'
          value: 'busbar-provisioning-locks'
        }
        {
          name: 'BUSBAR_PROVISIONING_LOCK_WAIT_SECONDS'
          value: '60'
        }
      ]
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: deploymentContainerUrl
          authentication: {
            type: 'SystemAssignedIdentity'
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
      }
      runtime: {
        name: 'python'
        version: '3.13'
      }
    }
  }
}

output appName string = app.name
output principalId string = app.identity.principalId
output defaultHostName string = app.properties.defaultHostName
