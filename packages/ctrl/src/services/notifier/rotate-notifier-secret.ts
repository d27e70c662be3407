// NotifierService.RotateNotifierSecret: a new signing secret, shown in this answer only.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { RotateNotifierSecretRequest, RotateNotifierSecretResponseSchema } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import type { Store } from "@flotilla/store";
import { recordWrite } from "../../audit-trail.ts";
import * as validate from "../../validate.ts";

export function rotateNotifierSecret(store: Store) {
  return async (req: RotateNotifierSecretRequest, ctx: HandlerContext): Promise<MessageInitShape<typeof RotateNotifierSecretResponseSchema>> => {
    const { notifier, secret } = await store.notifications.rotateSecret(validate.id(req.name, "name"));
    await recordWrite(store, ctx, "notifier", req.name);
    return { notifier, signingSecret: secret };
  };
}
