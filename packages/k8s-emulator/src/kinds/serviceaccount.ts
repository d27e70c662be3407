// core/v1 ServiceAccount: pkg/registry/core/serviceaccount/strategy.go; stored as given, with
// the TokenRequest subresource (`token`, served by http/serving.ts and auth.ts).
import { CORE, TYPE_META, bool, keyedList, list, obj } from "../openapi-schemas.ts";
import { defineKind } from "./strategy.ts";

export const serviceAccounts = defineKind({
  group: "",
  version: "v1",
  kind: "ServiceAccount",
  resource: "serviceaccounts",
  namespaced: true,
  shortNames: ["sa"],
  extraSubresources: ["token"],
  definitions: {
    [`${CORE}.ServiceAccount`]: obj("ServiceAccount binds together a name, a principal for non-humans, and a set of secrets.", {
      ...TYPE_META,
      secrets: keyedList(`${CORE}.ObjectReference`, "name", "Secrets pods running as this account may use."),
      imagePullSecrets: list(`${CORE}.LocalObjectReference`, "Secrets for pulling container images."),
      automountServiceAccountToken: bool("Whether pods running as this account mount an API token automatically."),
    }),
  },
});
