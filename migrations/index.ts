// The database schema as versioned, portable Kysely migrations, applied in name order by
// @flotilla/store (packages/store/src/migrate.ts). Imported statically, so that a bundler
// carries every migration into ctrl's bundle; a new migration is a new file here and a
// line below (packages/store/test/migrations.test.ts checks that both agree).
import type { Migration } from "kysely/migration";
import * as desiredState from "./0001_desired_state.ts";
import * as observations from "./0002_observations.ts";
import * as agentTokenLifecycle from "./0003_agent_token_lifecycle.ts";
import * as leaderEpochs from "./0004_leader_epochs.ts";
import * as agentTokenMac from "./0005_agent_token_mac.ts";
import * as operatorsHistory from "./0006_operators_history.ts";
import * as leaderSince from "./0007_leader_since.ts";
import * as statusTransitions from "./0008_status_transitions.ts";
import * as regionLabels from "./0009_region_labels.ts";
import * as rollouts from "./0010_rollouts.ts";
import * as leases from "./0011_leases.ts";
import * as desiredSecretEnvSealed from "./0012_desired_secret_env_sealed.ts";
import * as regionSecretKeyEpoch from "./0013_region_secret_key_epoch.ts";
import * as projects from "./0014_projects.ts";
import * as rolloutAnalysis from "./0015_rollout_analysis.ts";
import * as notifiers from "./0016_notifiers.ts";
import * as auditPrincipal from "./0017_audit_principal.ts";
import * as deliveriesDueByNotifier from "./0018_deliveries_due_by_notifier.ts";

/** Every migration, by name (its file name without the extension). */
export const MIGRATIONS: Readonly<Record<string, Migration>> = {
  "0001_desired_state": desiredState,
  "0002_observations": observations,
  "0003_agent_token_lifecycle": agentTokenLifecycle,
  "0004_leader_epochs": leaderEpochs,
  "0005_agent_token_mac": agentTokenMac,
  "0006_operators_history": operatorsHistory,
  "0007_leader_since": leaderSince,
  "0008_status_transitions": statusTransitions,
  "0009_region_labels": regionLabels,
  "0010_rollouts": rollouts,
  "0011_leases": leases,
  "0012_desired_secret_env_sealed": desiredSecretEnvSealed,
  "0013_region_secret_key_epoch": regionSecretKeyEpoch,
  "0014_projects": projects,
  "0015_rollout_analysis": rolloutAnalysis,
  "0016_notifiers": notifiers,
  "0017_audit_principal": auditPrincipal,
  "0018_deliveries_due_by_notifier": deliveriesDueByNotifier,
};
