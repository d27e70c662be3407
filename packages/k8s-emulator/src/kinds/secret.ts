// core/v1 Secret: pkg/registry/core/secret/strategy.go (the `type` field label), the type
// default of SetDefaults_Secret, and stringData as the core/v1 conversion folds it into data.
import { CORE, TYPE_META, bool, obj, str, strMap } from "../openapi-schemas.ts";
import { setDefault } from "../defaults.ts";
import { field } from "../selectors.ts";
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
});
