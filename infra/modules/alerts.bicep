// Dead-letter alert: fires when any entity of the namespace holds more than `threshold` dead-lettered
// messages (metric DeadletteredMessages, split by EntityName so the alert names the entity). The timer
// re-drive drains transient failures on its own; an alert that stays fired means messages that re-drive
// will not fix (see docs/operations.md).

param namespaceId string
param alertName string

@description('Alert when an entity has more dead-lettered messages than this.')
param threshold int

@description('E-mail address notified by the alert; empty: the alert fires without notifying anyone.')
param notifyEmail string

param tags object

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = if (!empty(notifyEmail)) {
  name: '${alertName}-ag'
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'busbardlq'
    enabled: true
    emailReceivers: [
      {
        name: 'operator'
        emailAddress: notifyEmail
        useCommonAlertSchema: true
      }
    ]
  }
}

resource deadLetterAlert 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: alertName
  location: 'global'
  tags: tags
  properties: {
    description: 'Dead-lettered messages above ${threshold} on a Busbar entity.'
    severity: 2
    enabled: true
    scopes: [
      namespaceId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'DeadLetteredMessages'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'DeadletteredMessages'
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: threshold
          timeAggregation: 'Maximum'
        }
      ]
    }
    actions: empty(notifyEmail) ? [] : [
      {
        actionGroupId: actionGroup.id
      }
    ]
  }
}
