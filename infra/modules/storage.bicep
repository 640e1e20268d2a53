// Two storage accounts, both without shared keys (Microsoft Entra ID only):
//  - the Functions host account (AzureWebJobsStorage: timer leases, host keys) holding the Flex
//    Consumption deployment container that `func azure functionapp publish` uploads to;
//  - the archive account, hierarchical namespace on (ADLS Gen2), holding the Parquet failure archive
//    that the re-drive function writes and the Databricks replay job reads.
// Separate accounts keep the app's broad host-storage role away from the archive.

param location string

@description('Functions host storage account name (3-24 lowercase letters and digits).')
@minLength(3)
@maxLength(24)
param hostAccountName string

@description('Archive storage account name (3-24 lowercase letters and digits).')
@minLength(3)
@maxLength(24)
param archiveAccountName string

@description('Zone-redundant host storage (ZRS), as a zone-redundant Flex Consumption plan needs.')
param zoneRedundant bool

@description('Replication of the archive: geo-redundant unless a deployment chooses otherwise.')
@allowed([
  'Standard_GRS'
  'Standard_GZRS'
  'Standard_RAGRS'
  'Standard_RAGZRS'
  'Standard_LRS'
  'Standard_ZRS'
])
param archiveSku string = 'Standard_GRS'

@description('Blob container for the Flex Consumption deployment package.')
param deploymentContainerName string

@description('Blob container (ADLS Gen2 file system) for the Parquet failure archive.')
param archiveContainerName string

param tags object

resource hostAccount 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  // checkov:skip=CKV_AZURE_43: the name is a parameter checkov cannot evaluate; @minLength/@maxLength bound it and main.bicep builds it lowercase from baseName (3-11), 'host' and an 8-character uniqueString
  // checkov:skip=CKV_AZURE_35: without virtual network integration the Flex Consumption host reaches AzureWebJobsStorage and its deployment container over the public endpoint (the App Service platform is not a trusted service of the storage firewall); access is Entra ID only (shared keys off)
  // checkov:skip=CKV_AZURE_206: holds only what a redeploy and a publish recreate (timer leases, host keys, the deployment package); ZRS when zoneRedundant
  name: hostAccountName
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: zoneRedundant ? 'Standard_ZRS' : 'Standard_LRS'
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
  // checkov:skip=CKV_AZURE_43: the name is a parameter checkov cannot evaluate; @minLength/@maxLength bound it and main.bicep builds it lowercase from baseName (3-11), 'arch' and an 8-character uniqueString
  // checkov:skip=CKV_AZURE_35: written by the Function App over the public endpoint (Flex Consumption without virtual network integration) and read by the Databricks replay job; access is Entra ID only (shared keys off)
  name: archiveAccountName
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: archiveSku
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
