// coordination.k8s.io/v1 Lease, leader election's lock (client-go resourcelock.LeaseLock):
// pkg/registry/coordination/lease/strategy.go: namespaced, no status subresource, no
// generation, updates must carry a resourceVersion.
import { int, obj, resource, str } from "../openapi-schemas.ts";
import { defineKind } from "./strategy.ts";

export const leases = defineKind({
  group: "coordination.k8s.io",
  version: "v1",
  kind: "Lease",
  resource: "leases",
  namespaced: true,
  allowUnconditionalUpdate: false,
  definitions: {
    "io.k8s.api.coordination.v1.Lease": resource("A lease, e.g. of leader election.", "io.k8s.api.coordination.v1.LeaseSpec", undefined),
    "io.k8s.api.coordination.v1.LeaseSpec": obj("The holder and timing of a lease.", {
      holderIdentity: str("The holder of the lease."),
      leaseDurationSeconds: int("How long candidates wait before forcing an acquisition."),
      acquireTime: str("When the current lease was acquired (MicroTime).", { format: "date-time" }),
      renewTime: str("When the holder last renewed the lease (MicroTime).", { format: "date-time" }),
      leaseTransitions: int("Number of holder changes."),
      strategy: str("The strategy for picking the leader (coordinated leader election)."),
      preferredHolder: str("Signals to a holder that it should release the lease."),
    }),
  },
});
