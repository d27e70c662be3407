// core/v1 ConfigMap: pkg/registry/core/configmap/strategy.go; stored as given; the columns of
// printConfigMap (the number of keys, of data and binaryData together).
import { CORE, TYPE_META, bool, obj, strMap } from "../openapi-schemas.ts";
import { AGE, NAME, age } from "../table.ts";
import { isObject } from "../util.ts";
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
  printer: {
    columns: [NAME, { name: "Data", type: "string", description: "Data contains the configuration data.", priority: 0 }, AGE],
    cells: (o, now) => {
      const keys = (map: unknown) => (isObject(map) ? Object.keys(map).length : 0);
      return [o.metadata.name, keys(o.data) + keys(o.binaryData), age(o, now)];
    },
  },
});
