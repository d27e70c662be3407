// Records the writes that have no revision of their own (regions, agent tokens, operators)
// in the audit trail, after they succeed. Writes of the operator-owned resources record
// themselves, in their own transaction (the store's ResourceRepository).
import type { HandlerContext } from "@connectrpc/connect";
import type { Store } from "@flotilla/store";
import { actorOf, principalKey } from "./auth.ts";

export type AuditedKind = "region" | "agent_token" | "operator" | "rollout" | "project" | "notifier";

/** Records that the caller of `ctx` did `ctx.method` to the object (and why, if said), in `project` if it belongs to one. */
export function recordWrite(store: Store, ctx: HandlerContext, objectKind: AuditedKind, objectId: string, message = "", project = ""): Promise<void> {
  const principal = ctx.values.get(principalKey);
  return store.audit.record({
    author: { actor: actorOf(principal), message: message.slice(0, 1024), groups: principal.kind === "operator" ? principal.groups : undefined },
    action: ctx.method.name,
    objectKind,
    objectId,
    revision: 0,
    project,
  });
}
