// The largest request message each RPC accepts, by what it is for: an agent's report carries
// a batch of observations (--read-max-bytes, the largest of all), an operator's write one
// resource (--write-max-bytes: a resource is at most 256 KiB encoded, more as JSON), and every
// other request names things (--query-max-bytes: ids, regions, page tokens). A request above
// its RPC's limit is refused from its declared size where it declares one, else once it has
// sent that much, with RESOURCE_EXHAUSTED; it never costs the decoding of the largest limit.
import type { DescMethod } from "@bufbuild/protobuf";

export interface MessageLimits {
  /** ReportObservedState and ReportMeasurements: an agent's batch of observations or measurements. */
  readMaxBytes: number;
  /** Operator writes: Create…, Update…, Rollback. */
  writeMaxBytes: number;
  /** Everything else: reads, deletes, revocations, the streams' requests. */
  queryMaxBytes: number;
}

export const DEFAULT_MESSAGE_LIMITS: MessageLimits = { readMaxBytes: 4 * 1024 * 1024, writeMaxBytes: 1024 * 1024, queryMaxBytes: 64 * 1024 };

const WRITE = /^(Create|Update|Rollback)/;
const AGENT_REPORTS = new Set(["ReportObservedState", "ReportMeasurements"]);

/** The largest request message `method` accepts. */
export function messageLimit(method: DescMethod, limits: MessageLimits): number {
  if (method.parent.typeName === "ctrl.v1.ClusterService" && AGENT_REPORTS.has(method.name)) return limits.readMaxBytes;
  if (method.parent.typeName.startsWith("ctrl.v1.") && WRITE.test(method.name)) return Math.min(limits.writeMaxBytes, limits.readMaxBytes);
  return Math.min(limits.queryMaxBytes, limits.readMaxBytes);
}
