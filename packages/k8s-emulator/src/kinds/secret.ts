// core/v1 Secret: pkg/registry/core/secret/strategy.go (the `type` field label), the type
// default of SetDefaults_Secret, stringData as the core/v1 conversion folds it into data, and
// the columns of printSecret (the number of keys, never a value).
import { CORE, TYPE_META, bool, obj, str, strMap } from "../openapi-schemas.ts";
import { setDefault } from "../defaults.ts";
import { field } from "../selectors.ts";
import { AGE, NAME, age } from "../table.ts";
import { isObject, type JsonObject } from "../util.ts";
import { defineKind } from "./strategy.ts";

export const secrets = defineKind({
  group: "",
  version: "v1",
  kind: "Secret",
  resource: "secrets",
  namespaced: true,
  definitions: {
    [`${CORE}.Secret`]: obj("Secret holds secret data of a certain type.", {
      ...TYPE_META,
      type: str("Used to facilitate programmatic handling of secret data; defaults to Opaque."),
      data: strMap("Secret data, base64."),
      stringData: strMap("Write-only plain-text data, merged into data on write."),
      immutable: bool("Whether the data may not be updated."),
    }),
  },
  /** Type Opaque; stringData is written into data, base64, and not stored. */
  defaults(secret) {
    setDefault(secret as JsonObject, "type", "Opaque");
    if (!isObject(secret.stringData)) return;
    const data = isObject(secret.data) ? secret.data : {};
    for (const [key, value] of Object.entries(secret.stringData)) data[key] = Buffer.from(String(value)).toString("base64");
    secret.data = data;
    delete secret.stringData;
  },
  fieldLabels: { type: field("type") },
  printer: {
    columns: [
      NAME,
      { name: "Type", type: "string", description: "Used to facilitate programmatic handling of secret data.", priority: 0 },
      { name: "Data", type: "string", description: "Data contains the secret data, base64.", priority: 0 },
      AGE,
    ],
    cells: (o, now) => [o.metadata.name, String(o.type ?? ""), isObject(o.data) ? Object.keys(o.data).length : 0, age(o, now)],
  },
});
