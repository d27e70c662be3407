// core/v1 ConfigMap: pkg/registry/core/configmap/strategy.go; stored as given.
import { CORE, TYPE_META, bool, obj, strMap } from "../openapi-schemas.ts";
import { defineKind } from "./strategy.ts";

export const configMaps = defineKind({
  group: "",
  version: "v1",
  kind: "ConfigMap",
  resource: "configmaps",
  namespaced: true,
  shortNames: ["cm"],
  definitions: {
    [`${CORE}.ConfigMap`]: obj("ConfigMap holds configuration data for pods to consume.", {
      ...TYPE_META,
      data: strMap("Configuration data (UTF-8)."),
      binaryData: strMap("Binary configuration data, base64."),
      immutable: bool("Whether the data may not be updated."),
    }),
  },
});
