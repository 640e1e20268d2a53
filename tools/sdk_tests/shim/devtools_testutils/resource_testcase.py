RESOURCE_GROUP_PARAM = "resource_group"
