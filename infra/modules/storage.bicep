// Two storage accounts, both without shared keys (Microsoft Entra ID only):
//  - the Functions host account (AzureWebJobsStorage: timer leases, host keys) holding the Flex
//    Consumption deployment container that `func azure functionapp publish` uploads to;
//  - the archive account, hierarchical namespace on (ADLS Gen2), holding the Parquet failure archive
//    that the re-drive function writes and the Databricks replay job reads.
// Separate accounts keep the app's broad host-storage role away from the archive.

param location string

@description('Functions host storage account name (3-24 lowercase letters and digits).')
param hostAccountName string

@description('Archive storage account name (3-24 lowercase letters and digits).')
param archiveAccountName string

@description('Blob container for the Flex Consumption deployment package.')
param deploymentContainerName string

@description('Blob container (ADLS Gen2 file system) for the Parquet failure archive.')
param archiveContainerName string

param tags object

resource hostAccount 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: hostAccountName
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    allowSharedKeyAccess: false
    allowBlobPublicAccess: false
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
  }
}

resource hostBlobs 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: hostAccount
  name: 'default'
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: hostBlobs
  name: deploymentContainerName
}

resource archiveAccount 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: archiveAccountName
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    isHnsEnabled: true
    allowSharedKeyAccess: false
    allowBlobPublicAccess: false
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
  }
}

resource archiveBlobs 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: archiveAccount
  name: 'default'
}

resource archiveContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: archiveBlobs
  name: archiveContainerName
}

output hostAccountName string = hostAccount.name
output deploymentContainerUrl string = '${hostAccount.properties.primaryEndpoints.blob}${deploymentContainer.name}'
output archiveAccountName string = archiveAccount.name
output archiveContainerName string = archiveContainer.name
