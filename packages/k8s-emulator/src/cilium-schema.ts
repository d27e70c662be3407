// The openAPIV3Schema of cilium.io/v2 CiliumNetworkPolicy and
// CiliumClusterwideNetworkPolicy - a subset of Cilium's CRDs
// (pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnetworkpolicies.yaml): the
// rule shape (endpointSelector/nodeSelector, ingress/egress with their
// peers, ports and L7 rules kept open) with the real types, enums, patterns
// and required fields. Less common rule fields (ingressDeny, egressDeny,
// fromRequires, toGroups, icmps, auth, ...) are declared without their
// inner schema; everything not declared is pruned, as a real server would.
import type { Schema } from "./schema.ts";

const str: Schema = { type: "string" };
const strings: Schema = { type: "array", items: str };
const open: Schema = { "x-kubernetes-preserve-unknown-fields": true };
const openList: Schema = { type: "array", items: { type: "object", "x-kubernetes-preserve-unknown-fields": true } };

const labelSelector: Schema = {
  type: "object",
  description: "A label selector: matchLabels and matchExpressions are ANDed.",
  properties: {
    matchLabels: { type: "object", additionalProperties: str },
    matchExpressions: {
      type: "array",
      items: {
        type: "object",
        required: ["key", "operator"],
        properties: {
          key: str,
          operator: { type: "string", enum: ["In", "NotIn", "Exists", "DoesNotExist"] },
          values: strings,
        },
      },
    },
  },
};
const selectors: Schema = { type: "array", items: labelSelector };

const PORT_PATTERN = "^(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})|([a-zA-Z0-9]-?)*[a-zA-Z](-?[a-zA-Z0-9])*$";

const portRules: Schema = {
  type: "array",
  description: "Layer 4 ports (and optional layer 7 rules) a connection must use.",
  items: {
    type: "object",
    properties: {
      ports: {
        type: "array",
        items: {
          type: "object",
          required: ["port"],
          properties: {
            port: { type: "string", pattern: PORT_PATTERN, description: "A port number or an IANA service name." },
            endPort: { type: "integer", format: "int32", maximum: 65535, minimum: 0 },
            protocol: { type: "string", enum: ["TCP", "UDP", "SCTP", "ICMP", "ICMPv6", "VRRP", "IGMP", "ANY"] },
          },
        },
      },
      rules: { type: "object", "x-kubernetes-preserve-unknown-fields": true, description: "Layer 7 rules (http, dns, kafka, l7)." },
      serverNames: strings,
      listener: open,
      originatingTLS: open,
      terminatingTLS: open,
    },
  },
};

const ENTITIES = ["all", "world", "cluster", "host", "init", "ingress", "unmanaged", "remote-node", "health", "none", "kube-apiserver"];
const entities: Schema = { type: "array", items: { type: "string", enum: ENTITIES } };
const cidrSet: Schema = {
  type: "array",
  items: { type: "object", properties: { cidr: str, cidrGroupRef: str, cidrGroupSelector: labelSelector, except: strings } },
};

const ingressRule: Schema = {
  type: "object",
  description: "Traffic allowed into the selected endpoints.",
  properties: {
    fromEndpoints: selectors,
    fromNodes: selectors,
    fromCIDR: strings,
    fromCIDRSet: cidrSet,
    fromEntities: entities,
    fromRequires: selectors,
    fromGroups: openList,
    toPorts: portRules,
    icmps: openList,
    authentication: { type: "object", required: ["mode"], properties: { mode: { type: "string", enum: ["disabled", "required", "test-always-fail"] } } },
  },
};

const egressRule: Schema = {
  type: "object",
  description: "Traffic allowed out of the selected endpoints.",
  properties: {
    toEndpoints: selectors,
    toNodes: selectors,
    toCIDR: strings,
    toCIDRSet: cidrSet,
    toEntities: entities,
    toRequires: selectors,
    toServices: openList,
    toGroups: openList,
    toFQDNs: {
      type: "array",
      items: {
        type: "object",
        properties: {
          matchName: { type: "string", pattern: "^([-a-zA-Z0-9_]+[.]?)+$" },
          matchPattern: { type: "string", pattern: "^([-a-zA-Z0-9_*]+[.]?)+$" },
        },
      },
    },
    toPorts: portRules,
    icmps: openList,
    authentication: ingressRule.properties!.authentication,
  },
};

const rule: Schema = {
  type: "object",
  description: "A policy rule: the endpoints (or nodes) it selects and the traffic it allows or denies.",
  oneOf: [{ required: ["endpointSelector"] }, { required: ["nodeSelector"] }],
  properties: {
    description: str,
    endpointSelector: labelSelector,
    nodeSelector: labelSelector,
    ingress: { type: "array", items: ingressRule },
    ingressDeny: openList,
    egress: { type: "array", items: egressRule },
    egressDeny: openList,
    enableDefaultDeny: { type: "object", properties: { egress: { type: "boolean" }, ingress: { type: "boolean" } } },
    labels: {
      type: "array",
      items: { type: "object", required: ["key"], properties: { key: str, source: str, value: str } },
    },
  },
};

export const CILIUM_POLICY_SCHEMA: Schema = {
  type: "object",
  description: "A Cilium network policy: layer 3-7 rules for the endpoints it selects.",
  required: ["metadata"],
  properties: {
    apiVersion: str,
    kind: str,
    metadata: { type: "object" },
    spec: rule,
    specs: { type: "array", items: rule },
    status: {
      type: "object",
      description: "Written by the Cilium agents: per-node enforcement state.",
      properties: {
        conditions: {
          type: "array",
          items: {
            type: "object",
            required: ["status", "type"],
            properties: {
              type: str,
              status: { type: "string", enum: ["True", "False", "Unknown"] },
              lastTransitionTime: { type: "string", format: "date-time" },
              message: str,
              reason: str,
            },
          },
        },
        derivativePolicies: { type: "object", additionalProperties: open },
      },
    },
  },
};
