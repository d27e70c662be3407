// @flotilla/agent: the agent without the Kubernetes client (the render target needs none of
// it); the Kubernetes target, the observer and the client are in @flotilla/agent/kubernetes.
export { startAgent, type Agent } from "./agent.ts";
// The logger an AgentConfig takes (callers need not depend on @flotilla/runtime for it).
export { createLogger, silentLogger, type Logger } from "@flotilla/runtime";
export { AGENT_DEFAULTS, resolveConfig, type AgentConfig, type AgentIdentity, type AgentTunables, type ResolvedAgentConfig } from "./config.ts";
export { loop, startInOrder, type Runnable } from "./lifecycle.ts";
export { newReconciler, type Reconciler } from "./reconciler.ts";
export type { BackoffOptions } from "./backoff.ts";
export { DesiredTable, desiredResource, SnapshotStage, type DesiredEntry, type DesiredState, type EncodedResource, type EntryStatus } from "./desired-table.ts";
export {
  buildManifests,
  DESIRED_VERSION_ANNOTATION,
  FIELD_MANAGER,
  SECRET_ENV_CHECKSUM_ANNOTATION,
  tracksDesiredVersion,
  type KubeObject,
  type Manifests,
  type ObjectRef,
} from "./manifests.ts";
export { AgentMetrics } from "./metrics.ts";
export { AnalysisRunner, type AnalysisRunnerOptions } from "./analysis.ts";
export type { PruneOptions } from "./prune.ts";
export { WorkQueue, type WorkQueueOptions } from "./queue.ts";
export { dispatch, type DispatchOptions } from "./queue/dispatch.ts";
export { TargetError, type ManagedObject, type Target } from "./target.ts";
export { RenderTarget } from "./targets/render.ts";
export { DriftCorrector, type DriftOptions } from "./drift.ts";
export { clusterObservations, tableObservations, type ObservationSource } from "./observation.ts";
export { APPLIED_KINDS, type WatchedKind } from "./watched-kinds.ts";
export { Reporter, type ReporterOptions } from "./reporter.ts";
