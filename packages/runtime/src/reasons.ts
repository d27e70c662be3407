// ErrorInfo reasons of ctrl's agent-facing streams (documented in proto/ctrl/v1/cluster.proto):
// ctrl sends them, the agent acts on them. The one place they are spelt.

/** ErrorInfo domain of every reason below. */
export const ERROR_DOMAIN = "flotilla.dev";
/** The watch cursor is past the outbox retention or ahead of the database: run SyncDesiredState. */
export const RESYNC_REQUIRED = "RESYNC_REQUIRED";
/** The watch stream fell too far behind and was ended: reconnect and resume from the cursor. */
export const CONSUMER_TOO_SLOW = "CONSUMER_TOO_SLOW";
/** The report's leader epoch is older than one ctrl has seen for the region: the agent is no longer the leader. */
export const FENCED = "FENCED";
