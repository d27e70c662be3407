// ClusterService.GetSecretEnvSeals: the sealed secret values a region's agent lacks after a
// snapshot page (the pages leave them out; the store's desired-seals.ts), for that region's own
// agent only, as GetSecretKeys. ctrl opens nothing: the seals go out as stored. The answer is a
// prefix of what was asked for, bounded by --secret-seals-max deployments and by the message size.
import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { GetSecretEnvSealsRequest, GetSecretEnvSealsResponse } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { GetSecretEnvSealsResponseSchema, SecretEnvSealSchema } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { readSecretEnvSeals, type Store } from "@flotilla/store";
import { authorizeSecretValues, resolveAuthorizedRegion } from "../../auth.ts";
import * as validate from "../../validate.ts";
import type { StreamOptions } from "./options.ts";

/** A seal's encoding beyond its bytes at most (its id up to 63 characters, tags, lengths). */
const SEAL_OVERHEAD_BYTES = 80;

export function getSecretEnvSeals(store: Store, options: Pick<StreamOptions, "secretSealsMax" | "messageBytesMax">) {
  return async (req: GetSecretEnvSealsRequest, ctx: HandlerContext): Promise<GetSecretEnvSealsResponse> => {
    validate.dnsLabel("region", req.region);
    const region = await resolveAuthorizedRegion(ctx, store.regions, req.region);
    authorizeSecretValues(ctx, region);
    const asked = req.deployments.slice(0, options.secretSealsMax);
    const found = new Map(
      (
        await readSecretEnvSeals(
          store.database,
          region.id,
          asked.map(({ id, version }) => ({ id, version: Number(version) })),
        )
      ).map((s) => [s.id, s.sealed]),
    );
    const response = create(GetSecretEnvSealsResponseSchema);
    let bytes = 0;
    for (const { id } of asked) {
      const sealed = found.get(id);
      if (sealed) {
        bytes += sealed.length + SEAL_OVERHEAD_BYTES;
        // One seal at least, whatever its size: a prefix of none would never end.
        if (response.answered > 0 && bytes > options.messageBytesMax) break;
        response.seals.push(create(SecretEnvSealSchema, { id, sealed }));
      }
      response.answered++;
    }
    return response;
  };
}
