// core/v1 Service: pkg/registry/core/service/strategy.go and its storage (cluster IP and
// node port allocation, IP families; the cluster IP may not change), defaults from
// pkg/apis/core/v1/defaults.go SetDefaults_Service, validation from ValidateService,
// columns from printService.
import { objectField, setDefault } from "../defaults.ts";
import type { FieldError } from "../errors.ts";
import { CORE, int, keyedList, obj, openObject, ref, resource, str, strList, strMap } from "../openapi-schemas.ts";
import { AGE, NAME, age, labelsCell, specOf } from "../table.ts";
import { isObject, type JsonObject, type KubeObject } from "../util.ts";
import { portNumOrNameProblem } from "../validation.ts";
import { defineKind } from "./strategy.ts";

function validateService(o: KubeObject): FieldError[] {
  const errors: FieldError[] = [];
  const spec = isObject(o.spec) ? o.spec : {};
  const type = spec.type ?? "ClusterIP";
  if (!["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"].includes(type as string)) {
    errors.push({
      field: "spec.type",
      type: "Unsupported value",
      value: type,
      detail: 'supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"',
    });
  }
  const ports = spec.ports;
  if ((!Array.isArray(ports) || ports.length === 0) && type !== "ExternalName" && spec.clusterIP !== "None") {
    errors.push({ field: "spec.ports", type: "Required value", detail: "" });
  }
  if (Array.isArray(ports)) {
    ports.forEach((p, i) => {
      const port = isObject(p) ? p.port : undefined;
      if (!Number.isInteger(port) || (port as number) < 1 || (port as number) > 65535) {
        errors.push({ field: `spec.ports[${i}].port`, type: "Invalid value", value: port, detail: "must be between 1 and 65535, inclusive" });
      }
      if (ports.length > 1 && isObject(p) && !p.name) errors.push({ field: `spec.ports[${i}].name`, type: "Required value", detail: "" });
      const target = isObject(p) ? p.targetPort : undefined;
      const targetProblem = portNumOrNameProblem(target);
      if (targetProblem) errors.push({ field: `spec.ports[${i}].targetPort`, type: "Invalid value", value: target, detail: targetProblem });
    });
  }
  return errors;
}

export const services = defineKind({
  group: "",
  version: "v1",
  kind: "Service",
  resource: "services",
  namespaced: true,
  shortNames: ["svc"],
  categories: ["all"],
  nameRule: "dns1035",
  statusSubresource: true,
  definitions: {
    [`${CORE}.Service`]: resource(
      "A named abstraction of software service: a local port that the proxy listens on, and the selector that determines which pods answer requests sent through the proxy.",
      `${CORE}.ServiceSpec`,
      `${CORE}.ServiceStatus`,
    ),
    [`${CORE}.ServiceSpec`]: obj("ServiceSpec describes the attributes that a user creates on a service.", {
      type: str("How the Service is exposed: ExternalName, ClusterIP, NodePort, and LoadBalancer. Defaults to ClusterIP."),
      selector: strMap("Route service traffic to pods with label keys and values matching this selector."),
      ports: keyedList(`${CORE}.ServicePort`, "port", "The list of ports that are exposed by this service.", ["port", "protocol"]),
      clusterIP: str("The IP address of the service, usually assigned randomly."),
      clusterIPs: strList("IP addresses assigned to this service."),
      ipFamilies: strList("IP families (IPv4, IPv6) assigned to this service."),
      ipFamilyPolicy: str("SingleStack, PreferDualStack or RequireDualStack."),
      sessionAffinity: str("ClientIP or None. Defaults to None."),
      externalTrafficPolicy: str("How nodes distribute service traffic they receive on externally-facing addresses: Cluster or Local."),
      internalTrafficPolicy: str("How nodes distribute service traffic they receive on the ClusterIP: Cluster or Local."),
      externalName: str("The external reference for an ExternalName service."),
    }),
    [`${CORE}.ServicePort`]: obj(
      "ServicePort contains information on service's port.",
      {
        name: str("The name of this port within the service; required with more than one port."),
        protocol: str("TCP, UDP or SCTP. Default is TCP."),
        port: int("The port that will be exposed by this service."),
        targetPort: ref(
          "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
          "Number or name of the port to access on the pods targeted by the service. Defaults to port.",
        ),
        nodePort: int("The port on each node on which this service is exposed when type is NodePort or LoadBalancer."),
        appProtocol: str("The application protocol for this port."),
      },
      ["port"],
    ),
    [`${CORE}.ServiceStatus`]: obj("ServiceStatus represents the current status of a service.", {
      loadBalancer: openObject("The current status of the load-balancer, if one is present."),
      conditions: { type: "array", description: "Current service state.", items: openObject("A condition.") },
    }),
  },
  // spec.selector is a map[string]string (a Deployment's is a LabelSelector struct).
  mapFields: ["selector"],
  defaults(s, previous, allocate) {
    const spec = objectField(s, "spec");
    setDefault(spec, "type", "ClusterIP");
    setDefault(spec, "sessionAffinity", "None");
    if (spec.sessionAffinity === "ClientIP") {
      const config = objectField(spec, "sessionAffinityConfig");
      setDefault(objectField(config, "clientIP"), "timeoutSeconds", 10800);
    }
    const external = spec.type === "NodePort" || spec.type === "LoadBalancer";
    if (external) setDefault(spec, "externalTrafficPolicy", "Cluster");
    if (spec.type === "LoadBalancer") setDefault(spec, "allocateLoadBalancerNodePorts", true);
    if (spec.type !== "ExternalName") {
      // The cluster IP is allocated once and carried over by updates that omit it.
      const prevSpec = previous && isObject(previous.spec) ? previous.spec : {};
      setDefault(spec, "clusterIP", prevSpec.clusterIP ?? allocate.ip());
      setDefault(spec, "clusterIPs", [spec.clusterIP]);
      setDefault(spec, "ipFamilies", ["IPv4"]);
      setDefault(spec, "ipFamilyPolicy", "SingleStack");
      setDefault(spec, "internalTrafficPolicy", "Cluster");
    }
    const prevPorts = previous && isObject(previous.spec) && Array.isArray(previous.spec.ports) ? (previous.spec.ports as JsonObject[]) : [];
    if (Array.isArray(spec.ports)) {
      for (const p of spec.ports) {
        if (!isObject(p)) continue;
        setDefault(p, "protocol", "TCP");
        // targetPort 0 or "" means "same as port".
        if (p.targetPort === 0) delete p.targetPort;
        setDefault(p, "targetPort", p.port);
        if (external) {
          // Node ports survive updates that omit them, like cluster IPs.
          const kept = prevPorts.find((q) => isObject(q) && q.port === p.port && q.protocol === p.protocol)?.nodePort;
          setDefault(p, "nodePort", kept ?? allocate.nodePort());
        }
      }
    }
    if (!isObject(s.status)) s.status = { loadBalancer: {} };
  },
  validate: validateService,
  validateUpdate(old, o) {
    const clusterIP = (x: KubeObject) => (isObject(x.spec) ? x.spec.clusterIP : undefined);
    if (!clusterIP(old) || clusterIP(o) === clusterIP(old)) return [];
    return [{ field: "spec.clusterIPs[0]", type: "Invalid value", value: clusterIP(o), detail: "may not change once set" }];
  },
  printer: {
    columns: [
      NAME,
      { name: "Type", type: "string", description: "The type of the service.", priority: 0 },
      { name: "Cluster-IP", type: "string", description: "The cluster IP of the service.", priority: 0 },
      { name: "External-IP", type: "string", description: "The external IP of the service.", priority: 0 },
      { name: "Port(s)", type: "string", description: "The ports of the service.", priority: 0 },
      AGE,
      { name: "Selector", type: "string", description: "The selector of the service.", priority: 1 },
    ],
    cells(o, now) {
      const ports = (specOf(o).ports ?? []) as JsonObject[];
      const selector = (specOf(o).selector ?? {}) as Record<string, string>;
      return [
        o.metadata.name,
        specOf(o).type ?? "ClusterIP",
        specOf(o).clusterIP ?? "<none>",
        "<none>",
        ports.length === 0 ? "<none>" : ports.map((p) => `${p.port}${p.nodePort ? `:${p.nodePort}` : ""}/${p.protocol ?? "TCP"}`).join(","),
        age(o, now),
        Object.keys(selector).length === 0 ? "<none>" : labelsCell(selector),
      ];
    },
  },
});
