// ctrl.v1.OperatorService: operator accounts (named tokens with a fleet-wide role, or none:
// their roles then come from projects), and WhoAmI.
import type { ServiceImpl } from "@connectrpc/connect";
import { Role, type OperatorService } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { FLOTILLA_VERSION } from "@flotilla/runtime";
import type { Store } from "@flotilla/store";
import { actorOf, principalKey } from "../auth.ts";
import type { ProjectCatalog } from "../authorization/catalog.ts";
import { fleetRoleOf, projectRoles } from "../authorization/decide.ts";
import { recordWrite } from "../audit-trail.ts";
import { invalidArgument } from "../errors.ts";
import * as validate from "../validate.ts";

/** The bootstrap admin token's actor: no operator may take its name. */
const RESERVED_NAMES = new Set(["admin"]);

export function operatorService(store: Store, catalog: ProjectCatalog): ServiceImpl<typeof OperatorService> {
  return {
    async createOperator(req, ctx) {
      validate.dnsLabel("name", req.name);
      if (RESERVED_NAMES.has(req.name)) throw invalidArgument("name", `${JSON.stringify(req.name)} is reserved for the bootstrap admin token`);
      // ROLE_UNSPECIFIED: no fleet-wide role; the account's roles come from the projects that grant them.
      if (!(req.role in Role)) throw invalidArgument("role", "must be ROLE_VIEWER, ROLE_DEPLOYER, ROLE_ADMIN, or unset for none fleet-wide");
      const expireTime = validate.expiry(req, Date.now());
      const created = await store.operators.create(req.name, req.role, expireTime, actorOf(ctx.values.get(principalKey)));
      await recordWrite(store, ctx, "operator", req.name);
      return created;
    },
    async listOperators(req) {
      const page = await store.operators.list(req.pageSize, req.pageToken);
      return { operators: page.items, nextPageToken: page.nextPageToken };
    },
    async revokeOperator(req, ctx) {
      await store.operators.revoke(validate.id(req.name, "name"));
      await recordWrite(store, ctx, "operator", req.name);
      return {};
    },
    async whoAmI(_req, ctx) {
      const principal = ctx.values.get(principalKey);
      const roles = projectRoles(principal, await catalog.current());
      return {
        actor: actorOf(principal),
        role: fleetRoleOf(principal),
        serverVersion: FLOTILLA_VERSION,
        projectRoles: [...roles].map(([project, role]) => ({ project, role })),
        subject: principal.kind === "operator" ? (principal.subject ?? "") : "",
        groups: principal.kind === "operator" ? [...principal.groups] : [],
      };
    },
  };
}
