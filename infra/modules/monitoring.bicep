// Log Analytics workspace and Application Insights. Local authentication is off: the app sends
// telemetry with its managed identity (APPLICATIONINSIGHTS_AUTHENTICATION_STRING = Authorization=AAD and
// the Monitoring Metrics Publisher role, see roles.bicep).

param location string
param workspaceName string
param appInsightsName string
param tags object

resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: workspaceName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: 30
  }
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: appInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspace.id
    DisableLocalAuth: true
  }
}

output appInsightsName string = appInsights.name
// Not a secret: it names the ingestion endpoint; with local auth off, only Entra ID tokens are accepted.
output connectionString string = appInsights.properties.ConnectionString
